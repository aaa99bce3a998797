"""The report's first screen at 1400x900, in headless Chromium, as a new user opens it.

The verdict, the explanation of the slow steps' excess and the next experiment must lie inside
the first viewport (their bounding boxes within 900 px); every number there must equal its
record field and read as the formatting policy prints it; no console error may appear.
Pages: the H200 demo pipeline records, an H200 CUPTI capture, the synthetic two-rank incident
(with and without the delay-attribution and explained-change fields of the diag/compare
contract), and (slow) the demo through the whole workflow. Screenshots of the first screen go
to $STALLCASE_SCREENSHOTS when set (tests/make_report_screenshots.py refreshes docs/img/).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import report_cases as RC
from benchmarks.report_browser import Browser, find_chromium
from workflow_lib.core import records
from workflow_lib.report import build_report, fmt, load_records, write_report_files
from workflow_lib.report.model import Records

WIDTH, HEIGHT = 1400, 900
FIRST_SCREEN = ("#glance-verdict", "#glance-excess", "#glance-next")
KINDS = {"snapshot": "snapshot", "diagnosis": "diagnosis", "plan": "plan", "comparison": "comparison",
         "execution": "execution", "preflight": "preflight"}

pytestmark = pytest.mark.skipif(find_chromium() is None and not os.environ.get("STALLCASE_REQUIRE_CHROMIUM"),
                                reason="headless Chromium not installed (Debian: apt-get install -y chromium)")


@pytest.fixture(scope="module")
def browser():
    with Browser(width=WIDTH, height=HEIGHT) as b:
        yield b


def _pointer(rec, pointer: str):
    for part in pointer.strip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        rec = rec[int(part)] if isinstance(rec, list) else rec[part]
    return rec


def _from_files(base: Path):
    def resolve(src: str):
        name, pointer = src.split(":", 1)
        return _pointer(RC.pointed(base / f"{name}.json", KINDS[name.split("/")[0]]), pointer)
    return resolve


def first_screen(browser: Browser, page_path: Path, resolve, shot: Path | None = None) -> dict:
    """Open the page; assert the first screen holds the three answers, its numbers are the
    records', and nothing went wrong in the console. Returns what the first screen says."""
    page, _ = browser.open(page_path)
    try:
        assert page.eval("[window.innerWidth, window.innerHeight]") == [WIDTH, HEIGHT]
        boxes = page.eval("(function(){return %s.map(function(s){var e=document.querySelector(s);"
                          "if(!e) return null; var r=e.getBoundingClientRect(); return [s, r.top, r.bottom, r.height];});})()"
                          % list(FIRST_SCREEN))
        for sel, box in zip(FIRST_SCREEN, boxes):
            assert box is not None, f"{sel} missing"
            _, top, bottom, height = box
            assert height > 0 and 0 <= top and bottom <= HEIGHT, f"{sel} at {top:.0f}..{bottom:.0f} px, not in the first {HEIGHT} px"
        shown = page.eval("Array.prototype.map.call(document.querySelectorAll('#glance [data-src]'), function(e){"
                          "return [e.dataset.src, e.dataset.v, e.dataset.unit, e.textContent];})")
        import json

        for src, v, unit, text in shown:
            value = json.loads(v)
            assert value == resolve(src), src
            assert text == fmt.text_of(value, unit), (src, text)
        words = page.eval("document.getElementById('glance').innerText")
        assert "explained 0 ns" not in words
        assert "['" not in words and "=[" not in words  # no Python reprs
        assert page.errors == [], page.errors
        assert page.requests == [page_path.resolve().as_uri()], page.requests
        if shot is not None:
            page.screenshot(shot, first_screen=True)
        return {"numbers": shown, "text": words}
    finally:
        browser.close_page(page)


def _shot(name: str) -> Path | None:
    d = os.environ.get("STALLCASE_SCREENSHOTS")
    if not d:
        return None
    Path(d).mkdir(parents=True, exist_ok=True)
    return Path(d) / name


def test_h200_demo_first_screen(browser, tmp_path):
    p = RC.h200_pipeline_records("demo-ab", tmp_path / "results")
    if p is None:
        pytest.skip("H200 fixture tests/fixtures/h200/demo-ab not present")
    out = write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], tmp_path / "results",
                             p["snapshot"].parent / "report.html", perfetto=False)
    got = first_screen(browser, out, _from_files(out.parent), _shot("report-first-screen-h200-demo-ab.png"))
    comp = records.read_record(p["comparison"], "comparison")
    srcs = {s for s, *_ in got["numbers"]}
    # the verdict with its interval and noise floor, from the comparison record
    assert {"comparison:/estimate/ratio", "comparison:/estimate/ratio_low", "comparison:/estimate/ratio_high",
            "comparison:/noise_floor/pct"} <= srcs
    assert fmt.ratio_as_pct(comp["estimate"]["ratio"]) in got["text"]
    # this diagnosis attributed nothing (no CUPTI on that run): it names the missing evidence instead
    assert "No cause attributed" in got["text"] and "not observed" in got["text"]


@pytest.mark.parametrize("name", RC.H200_CAPTURES)
def test_h200_capture_first_screen(browser, tmp_path, name):
    inc = RC.h200_capture(name, tmp_path / "incidents")
    if inc is None:
        pytest.skip(f"H200 fixture tests/fixtures/capture/{name} not present")
    p = RC.results_for(inc, tmp_path / "results", trials=False)
    out = write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], tmp_path / "results",
                             p["snapshot"].parent / "report.html", perfetto=False)
    got = first_screen(browser, out, _from_files(out.parent), _shot(f"report-first-screen-h200-capture-{name}.png"))
    diag = RC.pointed(p["diagnosis"], "diagnosis")
    assert "No comparison yet" in got["text"]
    if diag["next_experiments"]:  # the ranked experiment is on the first screen, with its bound from the record
        assert diag["next_experiments"][0]["candidate_change"] in got["text"]
        assert "diagnosis:/next_experiments/0/recoverable_upper_bound_ns" in {s for s, *_ in got["numbers"]}


def test_synthetic_first_screen_before_and_after_the_attribution_fields(browser, tmp_path):
    inc = tmp_path / "incidents" / "rich"
    RC.rich_incident(inc)
    p = RC.results_for(inc, tmp_path / "results")
    recs = load_records(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"])
    # before: the record holds no excess per step (an older diagnosis); the slowest step and its
    # attributed findings stand in
    d0 = RC.pointed(p["diagnosis"], "diagnosis")  # the record with its steps inline, as version 2 held them
    old = {**d0, "schema_version": 2, "summary": {k: v for k, v in d0["summary"].items() if k != "slow_steps"},
           "steps": [{k: v for k, v in st.items() if k != "excess"} for st in d0["steps"]]}
    before_recs = Records(snapshot=recs.snapshot, diagnosis=old, plan=recs.plan, preflights=recs.preflights,
                          executions=recs.executions, comparison=recs.comparison)
    before = tmp_path / "before.html"
    before.write_text(build_report(before_recs, tmp_path / "results", perfetto_href=None), encoding="utf-8")
    got = first_screen(browser, before, _from_files(p["snapshot"].parent), _shot("report-first-screen-synthetic.png"))
    assert "Slowest:" in got["text"] and "collective wait" in got["text"]
    # after: summary.slow_steps with by_cause, and the comparison's components and sentence
    diag, comp = RC.with_attribution(d0, recs.comparison)
    after_recs = Records(snapshot=recs.snapshot, diagnosis=diag, plan=recs.plan, preflights=recs.preflights,
                         executions=recs.executions, comparison=comp)
    after = tmp_path / "after.html"
    after.write_text(build_report(after_recs, tmp_path / "results"), encoding="utf-8")
    mem = {"snapshot": recs.snapshot, "diagnosis": diag, "plan": recs.plan, "comparison": comp.to_json()}
    got = first_screen(browser, after, lambda src: _pointer(mem[src.split(":", 1)[0]], src.split(":", 1)[1]),
                       _shot("report-first-screen-synthetic-attributed.png"))
    srcs = {s for s, *_ in got["numbers"]}
    top = diag["summary"]["slow_steps"][0]
    assert {"diagnosis:/summary/slow_steps/0/excess_ns", "diagnosis:/summary/slow_steps/0/typical_ns"} <= srcs
    assert all(f"diagnosis:/summary/slow_steps/0/by_cause/{k}" in srcs for k in top["by_cause"])
    assert "diagnosis:/summary/slow_steps/0/grew/host_spans_ns/dataloader_next~1worker~00" in srcs  # a JSON pointer, escaped
    # the partitions that explain the change are listed, not the wall headline or the overlapping measures
    assert {"comparison:/components/2/delta_ns_per_step", "comparison:/components/3/floor_ns"} <= srcs
    assert not any(x.startswith(("comparison:/components/0/", "comparison:/components/1/")) for x in srcs)
    assert "input starvation" in got["text"] and "sync stall" in got["text"]
    assert comp.sentence in got["text"] and "within its floor" in got["text"]
    assert "predates" not in got["text"]


@pytest.mark.slow
def test_demo_workflow_first_screen(browser, demo_pipeline):
    report = demo_pipeline.demo / "report.html"
    got = first_screen(browser, report, _from_files(report.parent), _shot("report-first-screen-demo.png"))
    assert "Faster" in got["text"] or "Slower" in got["text"] or "No detectable change" in got["text"] or "Inconclusive" in got["text"]
    assert "These trials tested the candidate: --producers 4, --sync-every 0." in got["text"]


def test_cold_loader_first_screen_ranks_the_loader_and_shows_warm_up_once(browser, tmp_path):
    """Issue 25: a loader-starved trainer with a cold first step. The top next experiment is the
    loader; the warm-up line is on the first screen once, apart from it (CPU twin without a
    browser: tests/test_report_warm_up_and_copies.py)."""
    inc = RC.cold_loader_incident(tmp_path / "incidents" / "cold-loader")
    p = RC.results_for(inc, tmp_path / "results", trials=False)
    out = write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], tmp_path / "results",
                             p["snapshot"].parent / "report.html", perfetto=False)
    got = first_screen(browser, out, _from_files(out.parent), _shot("report-first-screen-cold-loader.png"))
    diag = RC.pointed(p["diagnosis"], "diagnosis")
    assert diag["next_experiments"][0]["check"] == "input_starvation"
    assert diag["next_experiments"][0]["candidate_change"] in got["text"]
    assert got["text"].count("once per process") == 1
    assert "diagnosis:/summary/warm_up/wall_ns" in {s for s, *_ in got["numbers"]}
    page, _ = browser.open(out)
    try:
        box = page.eval("(function(){var r=document.querySelector('#glance-warmup').getBoundingClientRect();"
                        "return [r.top, r.bottom];})()")
        assert 0 <= box[0] and box[1] <= HEIGHT, box
    finally:
        browser.close_page(page)
