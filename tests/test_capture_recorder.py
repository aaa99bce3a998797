"""FlightRecorder end to end on CPU: spans, steps, snapshot -> a valid incident directory."""

from __future__ import annotations

import json
import threading
import time

import pytest

from workflow_lib.capture import FlightRecorder
from workflow_lib.core.incident import read_incident
from workflow_lib.core.records import validate

from capture_helpers import busy_ms, recorder


def test_snapshot_writes_valid_incident_with_spans_steps_and_depth(tmp_path):
    rec = recorder(tmp_path, sources=("host", "sched"))
    with rec:
        for i in range(5):
            with rec.step(i):
                with rec.span("outer"):
                    with rec.span("inner"):
                        busy_ms(1)
        path = rec.snapshot("workload_boundary")
    assert path == tmp_path / "incidents" / "t"
    inc = read_incident(path)
    validate(inc.manifest, "incident_manifest")
    assert inc.manifest["clock"]["host"] == "monotonic"
    assert isinstance(inc.manifest["clock"]["unix_minus_host_ns"], int)
    spans = inc.table("spans").to_pandas()
    # between_steps: the gaps between step blocks, counted inside the following step
    assert sorted(spans["name"].unique()) == ["between_steps", "inner", "outer"]
    assert set(spans.loc[spans.name == "outer", "depth"]) == {0}
    assert set(spans.loc[spans.name == "inner", "depth"]) == {1}
    assert (spans["thread_id"] == threading.get_native_id()).all()
    steps = inc.table("steps").to_pandas()
    assert list(steps["step_id"]) == [0, 1, 2, 3, 4]
    assert ((steps["end_ns"] - steps["start_ns"]) >= 1_000_000).all()
    # start to start: each step after the first begins where the previous one ended (after
    # the recorder's sched sample) with a between_steps span from there to its block
    st, en = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    gaps = spans[spans.name == "between_steps"].sort_values("start_ns")
    assert len(gaps) == 4 and (gaps["start_ns"].to_numpy() == st[1:]).all()
    assert ((st[1:] - en[:-1]) >= 0).all() and ((st[1:] - en[:-1]) < 5_000_000).all()
    # Every outer span lies inside its step.
    for _, s in steps.iterrows():
        inside = spans[(spans.start_ns >= s.start_ns) & (spans.end_ns <= s.end_ns) & (spans.name == "outer")]
        assert len(inside) == 1
    srcs = inc.manifest["sources"]
    assert srcs["host"]["status"] == "observed"
    assert srcs["cupti"] == {"status": "not_observed", "reason": "not enabled (sources=['host', 'sched'])", "detail": {}}
    assert srcs["nvml"]["status"] == "not_observed"
    assert inc.manifest["workload"]["argv"]
    assert inc.manifest["recorder"]["dropped"]["snapshots"] == 0


def test_span_as_decorator_and_from_threads(tmp_path):
    rec = recorder(tmp_path, sources=("host",))

    @rec.span("work")
    def work(x):
        return x * 2

    tids = []

    def body():
        tids.append(threading.get_native_id())
        for _ in range(10):
            assert work(3) == 6

    with rec:
        ts = [threading.Thread(target=body) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        path = rec.snapshot("manual")
    spans = read_incident(path).table("spans").to_pandas()
    assert len(spans) == 30
    assert sorted(spans.groupby("thread_id").size().to_dict().items()) == sorted((t, 10) for t in tids)
    assert (spans["depth"] == 0).all()


def test_span_exception_propagates_and_is_recorded(tmp_path):
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        with pytest.raises(KeyError):
            with rec.span("boom"):
                raise KeyError("x")
        path = rec.snapshot("manual")
    assert read_incident(path).table("spans").to_pandas()["name"].tolist() == ["boom"]


def test_second_explicit_snapshot_gets_a_new_directory(tmp_path):
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        a = rec.snapshot("one")
        b = rec.snapshot("two")
    assert a.name == "t" and b.name == "t.2"
    assert read_incident(b).manifest["reason"] == "two"


def test_steps_out_file_written_on_stop(tmp_path, monkeypatch):
    out = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(out))
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        for i in range(4):
            with rec.step(i):
                busy_ms(2)
    got = json.loads(out.read_text())
    assert got["schema_version"] == 2 and got["covers"] == "iteration" and got["items"] is None
    assert len(got["steps_ns"]) == 4 and all(d >= 2_000_000 for d in got["steps_ns"])
    assert got["unusual"] == []


def test_recorder_off_is_noop_but_writes_steps(tmp_path, monkeypatch):
    out = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(out))
    monkeypatch.setenv("STALLCASE_RECORDER", "off")
    rec = recorder(tmp_path)
    with rec:
        with rec.span("x"):
            pass
        for i in range(3):
            with rec.step(i):
                busy_ms(1)
        assert rec.snapshot("manual") is None
    assert rec.retained_bytes() == 0
    assert not (tmp_path / "incidents").exists()
    assert len(json.loads(out.read_text())["steps_ns"]) == 3


def test_step_durations_truncation_is_reported(tmp_path, monkeypatch):
    from workflow_lib.capture import Budget

    out = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(out))
    rec = recorder(tmp_path, sources=("host",), budget=Budget(retained_bytes=1 << 20, max_step_durations=5))
    with rec:
        for i in range(8):
            with rec.step(i):
                pass
    got = json.loads(out.read_text())
    assert len(got["steps_ns"]) == 5
    assert any("truncated" in u and "5 of 8" in u for u in got["unusual"])


def test_time_window_limits_snapshot(tmp_path):
    from workflow_lib.capture import Budget

    rec = recorder(tmp_path, sources=("host",), budget=Budget(retained_bytes=1 << 20, window_ns=50_000_000))
    with rec:
        with rec.span("old"):
            pass
        time.sleep(0.12)
        with rec.span("new"):
            pass
        path = rec.snapshot("manual")
    assert read_incident(path).table("spans").to_pandas()["name"].tolist() == ["new"]


def test_unknown_source_and_bad_id_refused(tmp_path):
    with pytest.raises(ValueError):
        FlightRecorder(sources=("host", "perf"))
    from workflow_lib.core.errors import StallcaseError

    with pytest.raises(StallcaseError):
        FlightRecorder(incident_id="../x")


def test_over_cpu_target_samplers_back_off_and_say_so(tmp_path):
    from workflow_lib.capture import Budget

    # A target no sampler can meet: the tracker must back off and record it.
    rec = recorder(tmp_path, sources=("host", "sched"), budget=Budget(retained_bytes=1 << 20, cpu_share_target=1e-9))
    with rec:
        time.sleep(2.6)
        path = rec.snapshot("manual")
    targets = read_incident(path).manifest["recorder"]["targets"]
    assert targets["over_cpu_target_events"] >= 1
    assert targets["recorder_threads_cpu_ns"] > 0
    assert any("sched period ->" in a for a in targets["actions"])
    assert rec.sched.period_s > rec.sched.base_period_s
    assert any("over CPU target" in u for u in rec.unusual_events())


def test_forked_child_records_its_own_thread_id(tmp_path):
    import os

    rec = recorder(tmp_path, sources=("host",))
    with rec.span("parent"):
        pass
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: record one span and report the tid it was stored under
        try:
            with rec.span("child"):
                pass
            c = rec.host.spans.copy()
            tid = int(c.columns["code"][-1] >> 20)
            os.write(w, f"{tid} {os.getpid()}".encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 100).decode().split()
    os.waitpid(pid, 0)
    assert got[0] == got[1]  # main thread of the child: tid == its pid


def test_rank_from_environment_tags_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        with rec.step(0):
            with rec.span("x"):
                pass
        path = rec.snapshot("manual")
    inc = read_incident(path)
    assert inc.manifest["ranks"] == [3]
    assert inc.table("spans")["rank"].to_pylist() == [3]
    assert inc.table("steps")["rank"].to_pylist() == [3]


def test_repeated_step_ids_keep_latest_and_are_counted(tmp_path):
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        for loop in range(2):
            for i in range(3):
                with rec.step(i):
                    pass
        path = rec.snapshot("manual")
    inc = read_incident(path)
    assert inc.table("steps").num_rows == 3
    assert inc.manifest["sources"]["host"]["detail"]["steps_repeated_ids_dropped"] == 3


def test_cpu_is_accounted_per_thread_and_nvml_is_never_backed_off():
    from workflow_lib.capture.budget import Budget, TargetTracker

    asked = []
    t = TargetTracker(Budget(cpu_share_target=1e-12))
    t.t0_ns -= 2 * 10**9
    me = threading.get_native_id()
    t.check({"sched": me, "nvml": None}, 0, lambda name: asked.append(name) or None)
    assert asked == ["sched"]  # the costliest thread, by name
    assert t.report()["per_thread_cpu_ns"]["sched"] > 0


def test_recorder_backs_off_only_the_costly_sampler(tmp_path):
    rec = recorder(tmp_path, sources=("host", "sched"))
    base = rec.sched.period_s
    assert rec._back_off("nvml") is None and rec._back_off("writer") is None
    assert rec.sched.period_s == base
    assert "sched period ->" in rec._back_off("sched")
