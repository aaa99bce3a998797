"""A diagnosis' per-step results as two Parquet tables beside its record (issue 26).

The tables give back the record's step objects exactly, on every committed fixture diagnosis
(the H200 recorder and Kineto captures, the two-rank recorder job, the Kineto import fixture,
the data-movement captures); every row is checked on write and read; a version-2 record
(steps inline) reads into the same shape, and the readers (report, Perfetto, the trials'
components) give the same output for it as for the version-3 files of the same diagnosis.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import report_cases as RC
from workflow_lib.core import records
from workflow_lib.core.errors import InputError, RecordError, StallcaseError
from workflow_lib.diagnose import as_diagnosis, diagnose_dir, load_diagnosis, table_paths, write_diagnosis
from workflow_lib.diagnose import step_tables as T
from workflow_lib.diagnose.types import DIAGNOSIS_VERSION
from workflow_lib.importers.kineto import import_kineto

FIX = Path(__file__).parent / "fixtures"
INCIDENTS = [
    *(f"capture/{n}" for n in ("host-gap", "host-gap-kineto", "blocking-sync", "blocking-sync-kineto", "starved-queue",
                               "starved-queue-kineto")),
    "h200_transformer/transformer", "h200_transformer/transformer-kineto",
    "h200x2_collectives/recorder/rank0", "h200x2_collectives/recorder/rank1",
    *(f"h200/data-movement/{n}/incident" for n in ("pageable-recorder", "item-kineto", "recompile-recorder")),
]


def _v2_file(rec: dict, path: Path) -> Path:
    """The diagnosis as version 2 wrote it: one JSON record, its steps inline."""
    records.write_record(path, rec, "diagnosis")
    return path


@pytest.mark.parametrize("name", INCIDENTS)
def test_tables_give_back_every_step_of_the_fixture_diagnoses(name, tmp_path):
    src = FIX / name
    assert (src / "manifest.json").is_file(), f"fixture {src} missing"
    rec = diagnose_dir(src)
    steps_tbl, findings_tbl = T.tables_from_steps(rec["steps"])
    assert steps_tbl.schema == T.STEPS_SCHEMA and findings_tbl.schema == T.FINDINGS_SCHEMA
    assert steps_tbl.num_rows == len(rec["steps"]) and findings_tbl.num_rows == sum(len(s["findings"]) for s in rec["steps"])
    assert T.steps_from_tables(steps_tbl, findings_tbl) == rec["steps"]
    # written and read back: the same steps, the same record less its steps
    written = write_diagnosis(tmp_path / "diagnosis.json", rec)
    assert written["schema_version"] == DIAGNOSIS_VERSION and "steps" not in written
    got = load_diagnosis(tmp_path / "diagnosis.json")
    assert got.steps() == rec["steps"]
    some = [len(rec["steps"]) - 1, 0]
    assert got.steps(some) == [rec["steps"][i] for i in some]
    # the slow steps carry their findings in full: the first screen never opens the tables
    for s in got.record["summary"]["slow_steps"]:
        st = next(x for x in rec["steps"] if (x["rank"], x["step_id"]) == (s["rank"], s["step_id"]))
        assert s["findings"] == st["findings"]


def test_kineto_import_fixture_round_trips(tmp_path):
    inc = import_kineto([FIX / "kineto" / "new_rank0.json", FIX / "kineto" / "new_rank1.json.gz"], incident_id="k",
                        incidents_dir=tmp_path / "inc")
    rec = diagnose_dir(inc, out_path=tmp_path / "d.json")
    assert load_diagnosis(tmp_path / "d.json").steps() == rec["steps"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.findings.parquet", "d.json", "d.steps.parquet", "inc"]


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    """A two-rank incident with every source, its diagnosis as version 4 files and as version 2."""
    root = tmp_path_factory.mktemp("rich")
    RC.rich_incident(root / "incidents" / "rich")
    p = RC.results_for(root / "incidents" / "rich", root / "results", trials=False)
    v3 = load_diagnosis(p["diagnosis"])
    inline = dict(v3.record, schema_version=2, steps=v3.steps())
    del inline["step_tables"]
    v2 = _v2_file(inline, root / "v2" / "diagnosis.json")
    return {"root": root, "paths": p, "v3": v3, "v2": v2, "inline": inline}


def test_version_2_record_reads_into_the_same_shape(rich):
    old = load_diagnosis(rich["v2"])
    assert not table_paths(rich["v2"])["steps"].exists()  # read from the record alone
    # The same tables: schema and rows (a dictionary column's codes follow the writer that built
    # it: the engine's columns here, the step objects there).
    for name in ("steps_table", "findings_table"):
        a, b = getattr(old, name), getattr(rich["v3"], name)
        assert a.schema == b.schema and a.to_pylist() == b.to_pylist(), name
    assert {k: v for k, v in old.record.items() if k != "schema_version"} == \
        {k: v for k, v in rich["v3"].record.items() if k not in ("schema_version", "step_tables")}
    # a version-2 record written before slow steps kept their findings gets them from its steps
    bare = dict(rich["inline"], summary=dict(rich["inline"]["summary"], slow_steps=[
        {k: v for k, v in s.items() if k != "findings"} for s in rich["inline"]["summary"]["slow_steps"]]))
    assert as_diagnosis(bare).record["summary"]["slow_steps"] == rich["v3"].record["summary"]["slow_steps"]


def test_report_perfetto_and_components_agree_on_version_2_and_3(rich, tmp_path):
    from workflow_lib.report import build_report, load_records, summary_text
    from workflow_lib.report.perfetto import export_perfetto
    from workflow_lib.snapshot.build import load_tables
    from workflow_lib.trials.components import run_components

    p = rich["paths"]
    pages, texts, traces, comps = [], [], [], []
    for diag_path in (p["diagnosis"], rich["v2"]):
        recs = load_records(p["snapshot"], diag_path, p["plan"], p["comparison"])
        pages.append(build_report(recs, rich["root"] / "results"))
        texts.append(summary_text(recs))
        inc = load_tables(recs.snapshot, rich["root"] / "results")
        out = tmp_path / f"trace{len(traces)}.json"
        export_perfetto(inc, recs.diagnosis, out)
        traces.append(json.loads(out.read_text()))
        comps.append(run_components(recs.diagnosis, skip_steps=1, spans=inc.table("spans")))
    assert pages[0] == pages[1] and texts[0] == texts[1] and traces[0] == traces[1] and comps[0] == comps[1]
    # and each equals what the in-memory record with its steps inline gives
    assert run_components(rich["inline"], skip_steps=1, spans=inc.table("spans")) == comps[0]
    assert sum(1 for e in traces[0]["traceEvents"] if e.get("cat") == "finding") > 0
    assert "data-src=\"diagnosis:/steps/" in pages[0]


def test_findings_without_evidence_read_and_render(rich, tmp_path):
    """The vectorized diagnosis keeps evidence only for slow and warm-up steps at large sizes:
    a null evidence_json reads as evidence None and the report says it was not kept."""
    from workflow_lib.report import build_report, load_records

    d = rich["v3"]
    f = d.findings_table
    keep = {s["step_id"] for s in d.record["summary"]["slow_steps"]}
    step_ids = d.steps_table["step_id"].to_pylist()
    ev = [e if step_ids[r] in keep else None for r, e in zip(f["step_row"].to_pylist(), f["evidence_json"].to_pylist())]
    f2 = f.set_column(f.schema.get_field_index("evidence_json"), T.FINDINGS_SCHEMA.field("evidence_json"), pa.array(ev, pa.string()))
    shutil.copytree(rich["root"] / "results", tmp_path / "results")
    out = tmp_path / "results" / "rich"
    write_diagnosis(out / "diagnosis.json", type(d)(d.record, d.steps_table, f2))
    got = load_diagnosis(out / "diagnosis.json")
    none = [i for i, s in enumerate(got.steps()) if s["step_id"] not in keep]
    assert none and all(x["evidence"] is None for x in got.step(none[0])["findings"])
    recs = load_records(out / "snapshot.json", out / "diagnosis.json", None, None)
    page = build_report(recs, tmp_path / "results")  # the rich incident's 12 steps are all listed
    assert T.NOT_KEPT in page


def test_unknown_version_is_refused_in_one_line(rich, tmp_path):
    rec = json.loads(Path(rich["paths"]["diagnosis"]).read_text())
    for v, says in ((DIAGNOSIS_VERSION + 1, "newer than this stallcase reads"), (0, "schema_version")):
        bad = tmp_path / f"v{v}.json"
        bad.write_text(json.dumps(dict(rec, schema_version=v)))
        with pytest.raises(RecordError, match=says) as exc:
            load_diagnosis(bad)
        assert "\n" not in str(exc.value) and str(bad) in str(exc.value)


def _copy(rich, tmp_path) -> Path:
    for src in (Path(rich["paths"]["diagnosis"]), *table_paths(rich["paths"]["diagnosis"]).values()):
        shutil.copy(src, tmp_path / src.name)
    return tmp_path / "diagnosis.json"


def test_a_table_that_is_not_the_one_the_record_names_is_refused(rich, tmp_path):
    path = _copy(rich, tmp_path)
    tables = table_paths(path)
    data = bytearray(tables["findings"].read_bytes())
    data[len(data) // 2] ^= 0xFF
    tables["findings"].write_bytes(bytes(data))
    with pytest.raises(StallcaseError, match="digest mismatch") as exc:
        load_diagnosis(path)
    assert str(tables["findings"]) in str(exc.value) and "\n" not in str(exc.value)
    tables["steps"].unlink()
    with pytest.raises(InputError, match="not found"):
        load_diagnosis(path)


@pytest.mark.parametrize("column,value,says", [
    ("wall_ns", -5, "wall_ns != end_ns - start_ns"),
    ("unexplained_ns", 10**15, "explained_ns \\+ unexplained_ns != wall_ns"),
    ("gaps_longest_json", "{}", "gaps_longest_json is not a JSON list"),
])
def test_every_steps_row_is_checked(rich, column, value, says):
    t = rich["v3"].steps_table
    i = t.schema.get_field_index(column)
    vals = t[column].to_pylist()
    vals[-1] = value  # the last row: a check of every row, not a sample
    bad = t.set_column(i, T.STEPS_SCHEMA.field(column), pa.array(vals, T.STEPS_SCHEMA.field(column).type))
    with pytest.raises(InputError, match=says):
        T.check_steps(bad, "steps.parquet")


@pytest.mark.parametrize("column,value,says", [
    ("check", "no_such_check", "unknown check 'no_such_check'"),
    ("verdict", "maybe", "unknown verdict"),
    ("step_row", 10**6, "step_row outside"),
    ("explains_ns", 7, "explains_ns != 0|summing to other than"),
    ("share_of_excess", 1.5, "share_of_excess outside"),
    ("evidence_json", "[1]", "evidence_json is not a JSON object"),
])
def test_every_findings_row_is_checked(rich, column, value, says):
    d = rich["v3"]
    f = d.findings_table
    field = T.FINDINGS_SCHEMA.field(column)
    vals = f[column].to_pylist()
    # the last not-attributed finding (an attributed one may explain any time)
    verdicts = f["verdict"].to_pylist()
    k = max(i for i, v in enumerate(verdicts) if v != "attributed")
    vals[k] = value
    arr = pa.array(vals, pa.string()).dictionary_encode().cast(field.type) if pa.types.is_dictionary(field.type) \
        else pa.array(vals, field.type)
    bad = f.set_column(f.schema.get_field_index(column), field, arr)
    with pytest.raises(InputError, match=says):
        T.check_findings(bad, d.n_steps, "findings.parquet", explained_ns=d.steps_table["explained_ns"].to_numpy())


def test_a_refused_write_leaves_nothing(rich, tmp_path):
    bad = dict(rich["inline"], incident_id=7)  # the record violates its schema after the tables were made
    with pytest.raises(RecordError, match="incident_id"):
        write_diagnosis(tmp_path / "diagnosis.json", bad)
    assert list(tmp_path.iterdir()) == []
    steps = [dict(s) for s in rich["inline"]["steps"]]
    steps[-1] = dict(steps[-1], wall_ns=-1)
    with pytest.raises(InputError, match="wall_ns"):
        write_diagnosis(tmp_path / "diagnosis.json", dict(rich["inline"], steps=steps))
    assert list(tmp_path.iterdir()) == []


def test_an_output_the_record_cannot_replace_is_refused_before_the_tables(rich, tmp_path):
    (tmp_path / "precious.json").write_text("{}")
    (tmp_path / "diagnosis.json").symlink_to(tmp_path / "precious.json")
    with pytest.raises(StallcaseError, match="refusing to replace it"):
        write_diagnosis(tmp_path / "diagnosis.json", rich["inline"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["diagnosis.json", "precious.json"]


def test_finding_tracks_from_the_columns_are_the_walk_over_steps(rich):
    """The timeline's finding and gap tracks, read from the tables' columns, are what a walk over
    the step objects gives (the per-step loop they replace, written out here as the reference):
    a finding with a place (`at`, recorded by the diagnosis) drawn there, the others as shares."""
    import numpy as np

    from workflow_lib.report import load_records, timeline
    from workflow_lib.snapshot.build import load_tables

    p = rich["paths"]
    recs = load_records(p["snapshot"], p["diagnosis"])
    inc = load_tables(recs.snapshot, rich["root"] / "results")
    tl = timeline.build(inc, recs.diagnosis)
    tracks = {t["id"]: t for t in tl["tracks"]}
    origin, lo, hi = tl["origin_ns"], tl["start_ns"], tl["end_ns"]
    steps = rich["inline"]["steps"]
    seen = 0
    for r in sorted({-1 if s["rank"] is None else s["rank"] for s in steps}):
        seg, gaps = [], []
        for st in (s for s in steps if (-1 if s["rank"] is None else s["rank"]) == r):
            t0, t1 = st["start_ns"] - origin, st["end_ns"] - origin
            t = t0
            for f in st["findings"]:
                if f["verdict"] == "attributed" and f["explains_ns"] > 0:
                    placed = [(a["start_ns"] - origin, a["end_ns"] - origin) for a in f["at"] or ()]
                    if placed:
                        seg += [(a, b, f["check"], st["step_id"], 1) for a, b in placed]
                    else:
                        w = int(round(f["explains_ns"] * (t1 - t0) / max(st["wall_ns"], 1)))
                        seg.append((t, t + w, f["check"], st["step_id"], 0))
                        t += w
            gaps += [(g["start_ns"] - origin, g["end_ns"] - origin) for g in st["gaps"]["longest"]]
        s, e, c, i, pl = (np.array(x) for x in zip(*seg))
        want = timeline._interval_track(f"findings:{r}", "findings", f"{timeline._rank_label(r)}findings", s.astype(np.int64),
                                        e.astype(np.int64), c.astype(object), {"step_id": i, "placed": pl}, lo, hi, True,
                                        kind="findings")
        got = tracks[f"findings:{r}"]
        assert {k: got[k] for k in want} == want
        seen += int(pl.sum())
        gs, ge = (np.array(x, np.int64) for x in zip(*gaps))
        want = timeline._interval_track(f"gaps:{r}", "findings", "", gs, ge, None, None, lo, hi, True, kind="gaps")
        assert tracks[f"gaps:{r}"]["start"] == want["start"] and tracks[f"gaps:{r}"]["dur"] == want["dur"]
    assert seen > 0  # some findings were placed where the diagnosis says they sit, not only as shares


def test_verify_finds_a_damaged_or_missing_diagnosis_table(rich, tmp_path):
    from workflow_lib.snapshot.verify import verify

    root = tmp_path / "results"
    shutil.copytree(rich["root"] / "results", root)
    assert verify(root).ok
    tables = table_paths(root / "rich" / "diagnosis.json")
    data = bytearray(tables["steps"].read_bytes())
    data[-100] ^= 0x01
    tables["steps"].write_bytes(bytes(data))
    tables["findings"].unlink()
    got = {problem.split(" table ")[0] for _, problem in verify(root).corrupt}
    assert got == {"its steps", "its findings"}


def test_the_first_screen_reads_the_typed_summary_and_a_record_without_slow_steps(rich):
    """glance reads Diagnosis.summary / .next_experiments by attribute: the slow steps of the
    record (typed SlowStep), and for a record written before slow steps existed (version 1: the
    summary has none, typed.ABSENT) the slowest step and its findings from the tables."""
    from workflow_lib.core.typed import ABSENT
    from workflow_lib.diagnose.types import SlowStep
    from workflow_lib.report import glance
    from workflow_lib.report.model import slow_steps

    v3 = rich["v3"]
    listed = v3.record["summary"]["slow_steps"]
    assert listed and all(isinstance(s, SlowStep) for s in v3.summary.slow_steps)
    got = glance.excess(v3, slow_steps(v3))
    assert got["kind"] == "excess" and [r["step_id"].value for r in got["rows"]] == [s["step_id"] for s in listed][:len(got["rows"])]
    nxt = glance.next_experiment(v3, None)
    assert nxt["kind"] == ("ranked" if v3.record["next_experiments"] else "none")
    summary = {k: v for k, v in v3.record["summary"].items() if k not in ("slow_steps", "warm_up")}
    old = as_diagnosis(dict(rich["inline"], summary=summary, next_experiments=[]))
    assert old.summary.slow_steps is ABSENT and old.summary.warm_up is ABSENT
    got = glance.excess(old, slow_steps(old))
    assert got["kind"] == "slowest" and got["steps"].value == summary["steps"]
    assert glance.warm_up(old) is None and glance.next_experiment(old, None)["kind"] == "none"


def test_version_3_record_reads_with_no_places(rich, tmp_path):
    """A version-3 diagnosis (written before findings recorded where they sit) still reads:
    records.upgrade gives its slow steps' findings `at` null, its findings table gets at_json
    null, and the report draws every finding as a share of its step."""
    import blake3
    import pyarrow.parquet as pq

    from workflow_lib.report import timeline
    from workflow_lib.report import load_records
    from workflow_lib.snapshot.build import load_tables

    new = json.loads(Path(rich["paths"]["diagnosis"]).read_text())
    assert any(f["at"] for s in new["summary"]["slow_steps"] for f in s["findings"])  # the rich case places some
    old = dict(new, schema_version=3, summary=dict(new["summary"], slow_steps=[
        dict(s, findings=[{k: v for k, v in f.items() if k != "at"} for f in s["findings"]])
        for s in new["summary"]["slow_steps"]]))
    out = tmp_path / "rich" / "diagnosis.json"
    shutil.copytree(Path(rich["paths"]["diagnosis"]).parent, out.parent)
    paths = table_paths(out)
    pq.write_table(rich["v3"].findings_table.drop_columns(["at_json"]), paths["findings"])
    old["step_tables"]["findings"]["digest"] = blake3.blake3(paths["findings"].read_bytes()).hexdigest()
    records.write_record(out, old, "diagnosis")
    got = load_diagnosis(out)
    assert got.record["schema_version"] == DIAGNOSIS_VERSION
    assert all(f["at"] is None for s in got.summary.slow_steps for f in s.findings)
    assert got.findings_table["at_json"].null_count == got.findings_table.num_rows
    assert got.steps() == [dict(s, findings=[dict(f, at=None) for f in s["findings"]]) for s in rich["v3"].steps()]
    recs = load_records(rich["paths"]["snapshot"], out)
    inc = load_tables(recs.snapshot, rich["root"] / "results")
    tracks = [t for t in timeline.build(inc, got)["tracks"] if t["kind"] == "findings"]
    assert tracks and all(set(t["placed"]) == {0} for t in tracks)
