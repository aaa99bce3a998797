"""Steps cover the whole iteration: the README's loop and `rec.steps(loader)` both put the
loader's wait inside the step, the diagnosis sees it as input wait, and the per-step
durations the trial runner reads are iteration times. Steps carry their declared work."""

from __future__ import annotations

import json
import time

import pyarrow as pa

from workflow_lib.core import records, tables
from workflow_lib.diagnose import DiagnoseOptions, diagnose_dir
from workflow_lib.core.incident import read_incident

from capture_helpers import busy_ms, recorder

WAIT_MS, BODY_MS = 12, 4


def slow_loader(n, batch=3):
    for i in range(n):
        time.sleep(WAIT_MS / 1000)  # the loader's next(): the data wait the README loop hides
        yield list(range(batch))


def test_readme_loop_counts_the_wait_between_steps(tmp_path, monkeypatch):
    out = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(out))
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        for i, batch in enumerate(slow_loader(8)):
            with rec.step(i, items=len(batch)):
                with rec.span("forward"):
                    busy_ms(BODY_MS)
        path = rec.snapshot("workload_boundary")
    got = records.read_record(out, "steps_out")
    # every step after the first holds the wait: iteration time, not body time
    assert all(d >= (WAIT_MS + BODY_MS) * 1e6 for d in got["steps_ns"][1:]), got["steps_ns"]
    assert got["steps_ns"][0] < (WAIT_MS + BODY_MS) * 1e6  # the first has no previous step to start from
    assert got["items"] == [3] * 8 and got["tokens"] is None
    inc = read_incident(path)
    steps = inc.table("steps").to_pandas()
    assert list(steps["items"]) == [3] * 8 and steps["tokens"].isna().all()
    spans = inc.table("spans").to_pandas()
    gaps = spans[spans.name == "between_steps"]
    assert len(gaps) == 7 and (gaps.end_ns - gaps.start_ns >= WAIT_MS * 1e6).all()
    diag = diagnose_dir(path)  # the diagnosis's step table is the iteration too
    assert all(s["wall_ns"] >= (WAIT_MS + BODY_MS) * 1e6 for s in diag["steps"][1:])
    # and it counts the gap as input wait (attributed once GPU evidence says the GPU sat idle)
    rx = DiagnoseOptions().wait_regex()
    assert rx.search("between_steps") and rx.search("dataloader.next") and not rx.search("forward")


def test_steps_iterator_times_next_inside_the_step(tmp_path, monkeypatch):
    out = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(out))
    rec = recorder(tmp_path, sources=("host",))
    seen = []
    with rec:
        for batch in rec.steps(slow_loader(6, batch=5), items=len, tokens=lambda b: 10 * len(b)):
            seen.append(batch)
            busy_ms(BODY_MS)
        path = rec.snapshot("workload_boundary")
    assert len(seen) == 6
    got = json.loads(out.read_text())
    assert len(got["steps_ns"]) == 6
    assert all(d >= (WAIT_MS + BODY_MS) * 1e6 for d in got["steps_ns"])  # the first one too
    assert got["items"] == [5] * 6 and got["tokens"] == [50] * 6
    inc = read_incident(path)
    steps = inc.table("steps").to_pandas()
    spans = inc.table("spans").to_pandas()
    waits = spans[spans.name == "dataloader.next"]
    assert len(waits) == 7  # six batches and the next() that found the loader exhausted
    for (_, s), (_, w) in zip(steps.iterrows(), waits.sort_values("start_ns").iloc[:6].iterrows()):
        assert s.start_ns <= w.start_ns and w.end_ns <= s.end_ns


def test_steps_iterator_ends_the_step_on_break(tmp_path, monkeypatch):
    out = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(out))
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        for i, _ in enumerate(rec.steps(slow_loader(10))):
            if i == 2:
                break
    assert len(json.loads(out.read_text())["steps_ns"]) == 3


def test_a_bad_work_counter_is_recorded_not_raised(tmp_path):
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        for _ in rec.steps([1, 2], items=len):  # ints have no len()
            pass
    assert any("counting its work" in e for e in rec.errors)
    assert rec.steps_out_record().items is None


def test_steps_table_without_work_columns_still_reads(tmp_path):
    old = pa.table({"step_id": pa.array([0, 1], pa.int64()), "thread_id": pa.array([7, 7], pa.int64()),
                    "start_ns": pa.array([0, 10], pa.int64()), "end_ns": pa.array([10, 20], pa.int64())})
    import pyarrow.parquet as pq

    pq.write_table(old, tmp_path / "steps.parquet")
    t = tables.read_table(tmp_path / "steps.parquet", "steps")
    assert t["items"].null_count == 2 and t["tokens"].null_count == 2


def test_steps_out_version_1_still_validates():
    records.validate({"schema_version": 1, "steps_ns": [1, 2], "unusual": []}, "steps_out")
