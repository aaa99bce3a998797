"""The report shows what the records say and nothing they do not (no browser needed).

Every shown number carries data-src="RECORD:/json/pointer" and data-v; these tests resolve
each against the record file and compare, read the timeline's raw tracks back against the
snapshot's tables, and check that unobserved sources are named, never drawn as zeros.
"""

from __future__ import annotations

import functools
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

import report_cases as RC
from builders import make_incident, span, step
from workflow_lib.compare.types import Comparison
from workflow_lib.core import typed
from workflow_lib import cli
from workflow_lib.core import records
from workflow_lib.core.errors import StallcaseError
from workflow_lib.report import build_report, fmt, html, load_records, model, summary_text, timeline, write_report_files
from workflow_lib.snapshot.build import load_tables

KINDS = {"snapshot": "snapshot", "diagnosis": "diagnosis", "plan": "plan", "comparison": "comparison",
         "execution": "execution", "preflight": "preflight"}


class _Shown(HTMLParser):
    """Collects elements with data-src (their value, unit and text) and the JSON data block."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.numbers: list[dict] = []
        self._open: list[dict | None] = []
        self._in_data = False
        self.data_text = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("id") == "stallcase-data":
            self._in_data = True
        entry = {"tag": tag, "src": a["data-src"], "v": json.loads(a["data-v"]), "unit": a.get("data-unit"), "text": ""} if "data-src" in a else None
        if entry:
            self.numbers.append(entry)
        if tag not in ("line", "rect", "circle", "path", "meta", "br", "i"):
            self._open.append(entry)

    def handle_startendtag(self, tag, attrs):
        a = dict(attrs)
        if "data-src" in a:
            self.numbers.append({"tag": tag, "src": a["data-src"], "v": json.loads(a["data-v"]), "unit": None, "text": ""})

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_data = False
        if tag not in ("line", "rect", "circle", "path", "meta", "br", "i") and self._open:
            self._open.pop()

    def handle_data(self, data):
        if self._in_data:
            self.data_text += data
        for e in self._open:
            if e is not None:
                e["text"] += data


def parse(page: str) -> _Shown:
    p = _Shown()
    p.feed(page)
    return p


@functools.lru_cache(maxsize=None)
def _record(path: Path, kind: str) -> dict:
    return RC.pointed(path, kind)


def resolve(base: Path, src: str):
    """'diagnosis:/steps/3/wall_ns' or 'execution/b001:/runs/2/metric_ns' -> the record's value."""
    name, pointer = src.split(":", 1)
    kind = name.split("/")[0]
    rec = _record(base / f"{name}.json", KINDS[kind])
    for part in pointer.strip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        rec = rec[int(part)] if isinstance(rec, list) else rec[part]
    return rec


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    root = tmp_path_factory.mktemp("rich")
    RC.rich_incident(root / "incidents" / "rich")
    paths = RC.results_for(root / "incidents" / "rich", root / "results")
    out = write_report_files(paths["snapshot"], paths["diagnosis"], paths["plan"], paths["comparison"], root / "results",
                             root / "results" / "rich" / "report.html")
    return {"root": root, "paths": paths, "page": out.read_text(encoding="utf-8"), "out": out}


def check_numbers(page: str, base: Path) -> set[str]:
    """Assert every shown number equals its record field; return the records they came from."""
    shown = parse(page)
    seen_records = set()
    for n in shown.numbers:
        assert n["v"] == resolve(base, n["src"]), n["src"]
        if n["unit"] is not None:  # a printed number: its text is the value, formatted
            assert n["text"] == fmt.text_of(n["v"], n["unit"]), n["src"]
        seen_records.add(n["src"].split(":")[0].split("/")[0])
    return seen_records


def test_every_shown_number_is_the_record_value(rich):
    assert len(parse(rich["page"]).numbers) > 200
    assert check_numbers(rich["page"], rich["out"].parent) >= {"snapshot", "diagnosis", "plan", "comparison", "execution"}


@pytest.mark.parametrize("name", RC.H200_PIPELINES)
def test_h200_pipeline_numbers_are_the_records(tmp_path, name):
    p = RC.h200_pipeline_records(name, tmp_path / "results")
    if p is None:
        pytest.skip(f"H200 fixture tests/fixtures/h200/{name} not present (captured on a GPU by the lead)")
    out = write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], tmp_path / "results",
                             tmp_path / "report.html")
    page = out.read_text(encoding="utf-8")
    seen = check_numbers(page, p["snapshot"].parent)
    assert {"snapshot", "plan", "comparison", "execution"} <= seen
    comp = typed.read(p["comparison"], Comparison)
    assert html.esc(model.verdict_words(comp)) in page
    if comp.aa_experiment:
        assert "deliberate A/A experiment" in page
    if not p["diagnosis"].is_file():
        assert "diagnosis.json absent" in page
    # the GPU demo was recorded without CUPTI: the kernel measures and tracks say why, never 0
    snap = records.read_record(p["snapshot"], "snapshot")
    assert snap["sources"]["cupti"]["status"] == "not_observed"
    reason = f"cupti: {fmt.reason(snap['sources']['cupti']['reason'])}"
    assert "[" not in reason and "'" not in reason  # the record's list repr is shown as words
    note = f"kernel sum, GPU busy, host API: <span class=\"missing\">not observed: {html.esc(reason)}</span>"
    assert (note in page) == p["diagnosis"].is_file()
    tl = json.loads(parse(page).data_text)["timeline"]
    assert [t["reason"] for t in tl["tracks"] if t["id"] == "kernels:none"] == [reason]


def test_slow_steps_show_the_four_measures_and_every_finding(rich):
    diag = RC.pointed(rich["paths"]["diagnosis"], "diagnosis")
    srcs = {n["src"] for n in parse(rich["page"]).numbers}
    listed = model.slow_steps(diag)
    assert listed and listed[0]["slow"]  # rank 1's starved step 3 is the slowest and slow
    top = diag["steps"][listed[0]["index"]]
    assert top["step_id"] == 3
    for s in listed:
        for key, _, _ in model.MEASURES:
            assert f"diagnosis:/steps/{s['index']}/{key}" in srcs
        for j, f in enumerate(diag["steps"][s["index"]]["findings"]):
            if f["verdict"] == "attributed":
                assert f"diagnosis:/steps/{s['index']}/findings/{j}/explains_ns" in srcs
    # unresolved findings say what is missing
    unresolved = [f for f in top["findings"] if f["verdict"] == "unresolved"]
    assert unresolved and all(html.esc(m) in rich["page"] for f in unresolved for m in f["missing"])
    for e in diag["next_experiments"]:
        assert html.esc(e["candidate_change"]) in rich["page"]


def test_timeline_raw_tracks_are_the_tables(rich):
    data = json.loads(parse(rich["page"]).data_text)
    tl = data["timeline"]
    snap = records.read_record(rich["paths"]["snapshot"], "snapshot")
    inc = load_tables(snap, rich["root"] / "results")
    k = inc.table("kernels")
    tracks = {t["id"]: t for t in tl["tracks"]}
    for t in tl["tracks"]:
        if not t["id"].startswith("kernels:"):
            continue
        assert t["encoding"] == "raw"
        _, r, d, st = t["id"].split(":")
        sel = pc.and_(pc.and_(pc.equal(k["rank"], int(r)), pc.equal(k["device"], int(d))), pc.equal(k["stream"], int(st)))
        sub = k.filter(sel)
        starts = np.cumsum(t["start"]) + tl["origin_ns"]
        order = np.argsort(sub["start_ns"].to_numpy(), kind="stable")
        assert starts.tolist() == sub["start_ns"].to_numpy()[order].tolist()
        assert t["dur"] == (sub["end_ns"].to_numpy() - sub["start_ns"].to_numpy())[order].tolist()
        assert [t["names"][i] for i in t["name"]] == sub["name"].to_numpy(zero_copy_only=False)[order].tolist()
    steps = tracks["steps:1"]
    assert (np.cumsum(steps["start"]) + tl["origin_ns"]).size == 6
    assert tl["events"] == sum(inc.table(n).num_rows for n in ("steps", "spans", "kernels", "memcpy", "runtime_api", "nvml", "collectives"))


def test_collective_wait_is_the_last_ranks_arrival(rich):
    tl = json.loads(parse(rich["page"]).data_text)["timeline"]
    tracks = {t["id"]: t for t in tl["tracks"]}
    r0, r1 = tracks["collectives:0"], tracks["collectives:1"]
    s0, s1 = np.cumsum(r0["start"]), np.cumsum(r1["start"])
    # rank 1 is starved in step 3 and arrives late: rank 0 waits exactly the difference there
    assert r0["wait"] == np.clip(s1 - s0, 0, None).tolist()
    assert r0["wait"][3] == 6 * RC.MS and sum(r0["wait"]) == 6 * RC.MS and max(r1["wait"]) == 0
    # the shading agrees with the diagnosis' own cross-rank finding for that step
    diag = RC.pointed(rich["paths"]["diagnosis"], "diagnosis")
    waits = [(st["rank"], st["step_id"], f["explains_ns"]) for st in diag["steps"] for f in st["findings"]
             if f["check"] == "collective_wait" and f["verdict"] == "attributed"]
    assert waits == [(0, 3, 6 * RC.MS)]


def test_not_observed_sources_are_named_never_drawn(tmp_path):
    inc_dir = tmp_path / "incidents" / "bare"
    make_incident(steps=[step(i, i * 1_000_000, (i + 1) * 1_000_000) for i in range(4)],
                  spans=[span("queue_wait", 0, 500_000)], incident_id="bare", write_to=inc_dir)
    paths = RC.results_for(inc_dir, tmp_path / "results", trials=False)
    out = write_report_files(paths["snapshot"], paths["diagnosis"], paths["plan"], paths["comparison"],
                             tmp_path / "results", tmp_path / "report.html")
    page = out.read_text(encoding="utf-8")
    tl = json.loads(parse(page).data_text)["timeline"]
    missing = {t["id"]: t for t in tl["tracks"] if t["status"] == "not_observed"}
    assert {"kernels:none", "nvml:gpu_util_pct:none", "nvml:sm_clock_mhz:none", "collectives:none", "runtime_api:none"} <= set(missing)
    for t in missing.values():
        assert t["kind"] == "missing" and t["reason"] and "start" not in t and "coverage" not in t
    assert missing["kernels:none"]["reason"] == "kernels: not in this synthetic case"
    # the measures that need kernels or API calls say why they are absent instead of showing 0
    assert "kernel sum, GPU busy: <span class=\"missing\">not observed: kernels: not in this synthetic case" in page
    assert "host API: <span class=\"missing\">not observed: runtime_api: not in this synthetic case" in page
    assert page.count(">not observed</span>") == 3 * 4
    assert "plan.json absent" in page and "comparison.json absent" in page
    text = summary_text(load_records(paths["snapshot"], paths["diagnosis"], paths["plan"], paths["comparison"]))
    assert "kernel sum, GPU busy: not observed: kernels: not in this synthetic case" in text
    assert "comparison: not run yet" in text and " 0 ns" not in text.split("slowest steps")[1].split("next experiments")[0]


def test_decimated_drawing_leaves_the_numbers_alone(rich):
    recs = load_records(*(rich["paths"][k] for k in ("snapshot", "diagnosis", "plan", "comparison")))
    inc = load_tables(recs.snapshot, rich["root"] / "results")
    raw = html.page(model.build(recs, timeline.build(inc, recs.diagnosis)))
    dec_tl = timeline.build(inc, recs.diagnosis, raw_total=0)
    dec = html.page(model.build(recs, dec_tl))
    assert any(t.get("encoding") == "buckets" for t in dec_tl["tracks"])
    key = lambda p: [(n["src"], json.dumps(n["v"]), n["text"]) for n in parse(p).numbers]  # noqa: E731
    assert key(raw) == key(dec)


def test_union_coverage_and_minmax_match_brute_force():
    rng = np.random.default_rng(5)
    s = rng.integers(0, 10_000, 300)
    e = s + rng.integers(0, 400, 300)
    mask = np.zeros(10_400, bool)
    for a, b in zip(s, e):  # brute force over 300 intervals (test only)
        mask[a:b] = True
    us, ue = timeline.union(s, e)
    assert int((ue - us).sum()) == int(mask.sum())
    assert np.all(us[1:] > ue[:-1])
    cov = timeline.coverage(s, e, 0, 10_400, 104)
    assert np.allclose(cov, mask.reshape(104, 100).mean(axis=1))
    ts = np.sort(rng.integers(0, 1000, 50))
    v = rng.normal(size=50)
    mn, mx = timeline.minmax(ts, v, 0, 1000, 10)
    for b in range(10):
        sel = (ts >= b * 100) & (ts < (b + 1) * 100)
        if sel.any():
            assert (mn[b], mx[b]) == (v[sel].min(), v[sel].max())
        else:
            assert np.isnan(mn[b])


def test_hostile_names_cannot_break_out_of_the_page(tmp_path):
    inc_dir = tmp_path / "incidents" / "hostile"
    evil = "</script><script>document.title='owned'</script><b>"
    make_incident(steps=[step(0, 0, 1_000_000)], spans=[span(evil, 0, 500_000)], incident_id="hostile", write_to=inc_dir)
    paths = RC.results_for(inc_dir, tmp_path / "results", trials=False)
    page = write_report_files(paths["snapshot"], paths["diagnosis"], paths["plan"], paths["comparison"],
                              tmp_path / "results", tmp_path / "r.html").read_text(encoding="utf-8")
    assert evil not in page
    tl = json.loads(parse(page).data_text)["timeline"]
    assert evil in [n for t in tl["tracks"] for n in t.get("names", [])]


def test_verdict_words_come_from_the_record(rich):
    comp = typed.read(rich["paths"]["comparison"], Comparison)
    words = model.verdict_words(comp)
    assert comp.verdict == "faster" and words.startswith("The candidate is faster.")
    # the one formatting policy: 3 significant digits, a real minus sign
    assert fmt.pct(comp.estimate.change_pct) in words and f"±{fmt.pct_abs(comp.noise_floor.pct)}" in words
    assert fmt.pct(comp.estimate.change_pct).startswith("−")
    assert html.esc(words) in rich["page"]


def test_mismatched_diagnosis_is_refused_in_one_line(rich, tmp_path):
    other = tmp_path / "incidents" / "other"
    make_incident(steps=[step(0, 0, 10)], incident_id="other", write_to=other)
    p = RC.results_for(other, tmp_path / "results", trials=False)
    with pytest.raises(StallcaseError) as err:
        write_report_files(rich["paths"]["snapshot"], p["diagnosis"], rich["paths"]["plan"], rich["paths"]["comparison"],
                           rich["root"] / "results", tmp_path / "x.html")
    assert "\n" not in str(err.value) and str(p["diagnosis"]) in str(err.value)


def test_perfetto_trace_written_next_to_the_report_and_linked(rich, tmp_path):
    trace = rich["out"].parent / "trace.perfetto.json"
    events = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    snap = records.read_record(rich["paths"]["snapshot"], "snapshot")
    assert len(kernels) == snap["tables"]["kernels"]["rows"]
    assert 'id="perfetto-link" href="trace.perfetto.json"' in rich["page"]
    # without an export, the page says how to make one instead of linking nothing
    p = rich["paths"]
    page = write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], rich["root"] / "results",
                              tmp_path / "report.html", perfetto=False).read_text(encoding="utf-8")
    assert "perfetto-link" not in page and "stallcase export incidents/rich -o trace.perfetto.json" in page


def test_show_prints_the_summary_and_writes_the_page(rich, tmp_path, capsys):
    results = rich["root"] / "results"
    assert cli.main(["show", "rich", "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert "verdict: faster" in out and "slowest steps" in out and "input_starvation" in out
    assert out == summary_text(load_records(*(rich["paths"][k] for k in ("snapshot", "diagnosis", "plan", "comparison"))))
    target = tmp_path / "page.html"
    assert cli.main(["show", "rich", "--results-dir", str(results), "--html", "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert cli.main(["show", "nope", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "nope" in err[0]


def test_build_report_without_trials_is_a_page(tmp_path):
    inc_dir = tmp_path / "incidents" / "solo"
    RC.rich_incident(inc_dir, incident_id="solo", steps_per_rank=2)
    p = RC.results_for(inc_dir, tmp_path / "results", trials=False)
    page = build_report(load_records(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"]), tmp_path / "results")
    assert "comparison.json absent" in page and "no execution records" in page


def test_too_few_blocks_show_no_interval_and_say_why(tmp_path):
    inc_dir = tmp_path / "incidents" / "few"
    RC.rich_incident(inc_dir, incident_id="few", steps_per_rank=2)
    p = RC.results_for(inc_dir, tmp_path / "results", blocks=2)
    out = write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], tmp_path / "results",
                             p["snapshot"].parent / "report.html")
    comp = typed.read(p["comparison"], Comparison)
    assert comp.verdict == "inconclusive" and comp.estimate.log_low is None
    page = out.read_text(encoding="utf-8")
    check_numbers(page, p["snapshot"].parent)
    assert "no interval: too few blocks" in page
    assert all(html.esc(r) in page for r in comp.reasons)


def test_observed_but_empty_sources_say_so(tmp_path):
    inc = make_incident(steps=[step(0, 0, 1_000_000)], spans=[], nvml=[], incident_id="empty")
    tl = timeline.build(inc, None)
    tracks = {t["id"]: t for t in tl["tracks"]}
    assert tracks["spans:empty"]["kind"] == "empty" and tracks["spans:empty"]["reason"] == "observed, but no events in the window"
    assert tracks["nvml:gpu_util_pct:none"] == {**tracks["nvml:gpu_util_pct:none"], "kind": "empty", "status": "observed"}
    assert tracks["kernels:none"]["kind"] == "missing"  # not passed: not observed, with the builder's reason
