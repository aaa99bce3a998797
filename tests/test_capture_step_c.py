"""The optional C step path (_stepext: StepCore and Marker) against the pure-Python one
(step_core.PyStepCore, sched_marks.PyMarker): the same rows, row for row, on one workload
that goes through every rule (follow, a gap that is not a follow, declared work, bad work, a
step of another thread, a pause's forget_last, the launcher marks, the reused start mark)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from capture_helpers import in_forked_child
from workflow_lib.capture import cext, step_core
from workflow_lib.capture.sources import sched_marks
from workflow_lib.capture.sources.host import NAME_BITS, HostSource
from workflow_lib.capture.sources.sched import SchedSampler, _RUNNING, _UNKNOWN
from workflow_lib.capture.steps_out import StepDurations

# Wide enough that a loaded machine does not decide which start reuses its mark (20 us ships).
REUSE_NS = 20_000_000
needs_ext = pytest.mark.skipif(cext.step is None, reason="C step path not built here (no compiler, or STALLCASE_SPAN_PATH=python)")


def _parts(path: str, launcher_tid: int):
    host = HostSource(1 << 8, 1 << 6)
    sampler = SchedSampler(1 << 8)  # not started: only the marks write its ring
    errors: list[str] = []
    sampler.marker = sched_marks.make(sampler.ring, sampler._scan_launchers, errors.append, _RUNNING, _UNKNOWN, path=path,
                                      reuse_ns=REUSE_NS)
    sampler.watch_thread(launcher_tid)
    durations = StepDurations(64)
    core = step_core.make(host, durations, sampler.marker, errors.append, path=path)
    afters: list[tuple] = []
    core.after = lambda step_id, t1, d, passed: afters.append((step_id, d > 0, passed))
    return host, sampler, durations, core, errors, afters


def _workload(core):
    for i in range(4):  # back-to-back steps: each start reuses the previous end mark
        t0 = core.start()
        core.step_end(i, t0, 8, None if i % 2 else 100)
    time.sleep(0.05)  # a wait between steps, over REUSE_NS: its own start mark
    t0 = core.start()
    core.step_end(4, t0, "x", 3)  # bad work: reported, -1
    t0 = core.start()
    core.step_end(7, t0, None, None)  # not the next id: no between-steps span
    core.forget_last()  # a pause: the next step follows none
    t0 = core.start()
    core.step_end(8, t0, 2.0, None)
    t0 = core.start()
    core.step_end(20, t0, 5, 6, False)  # rec.steps(): no follow
    core.record(30, 1000, 2000, 4242, 1, 2, False)  # another thread's step (the sidecar)
    core.record(31, 3000, 4000, None, None, None, False)


def _tables(host, sampler, durations):
    """Rows with times as ranks among the rows' times (equal times stay equal). `sampler`
    None: no marks (a started recorder's periodic samples, and the 20 us reuse rule on a loaded
    machine, would make them differ between two runs)."""
    st = host.steps.copy().columns
    sp = host.spans.copy().columns
    sc = sampler.ring.copy().columns if sampler is not None else {k: np.zeros(0, np.int64) for k in
                                                                  ("seq", "tid", "state", "ts_ns", "cpu")}
    times = np.concatenate([st["start_ns"], st["end_ns"], sp["start_ns"], sp["end_ns"], sc["ts_ns"]])
    rank = {int(t): r for r, t in enumerate(np.unique(times))}  # equal times stay equal
    steps = [(int(st["seq"][i]), int(st["step_id"][i]), int(st["tid"][i]), rank[int(st["start_ns"][i])],
              rank[int(st["end_ns"][i])], int(st["items"][i]), int(st["tokens"][i])) for i in range(len(st["seq"]))]
    spans = [(int(sp["seq"][i]), host._name_list[int(sp["code"][i]) & ((1 << NAME_BITS) - 1)], int(sp["code"][i]) >> NAME_BITS,
              rank[int(sp["start_ns"][i])], rank[int(sp["end_ns"][i])]) for i in range(len(sp["seq"]))]
    marks = [(int(sc["seq"][i]), int(sc["tid"][i]), int(sc["state"][i]), rank[int(sc["ts_ns"][i])], bool(sc["cpu"][i] > 0))
             for i in range(len(sc["seq"]))]
    n = durations.kept
    durs = [(int(durations.durations[k]) > 0, int(durations.items[k]), int(durations.tokens[k])) for k in range(n)]
    # Each duration is its step's end - start (every step recorded here has a row, in order).
    same = [int(durations.durations[k]) == int(st["end_ns"][k] - st["start_ns"][k]) for k in range(n)]
    return steps, spans, marks, durs, same


@needs_ext
def test_c_and_python_step_paths_write_the_same_rows():
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, daemon=True)  # a "launcher" thread, sampled at every mark
    helper.start()
    try:
        got = {}
        for path in ("c", "python"):
            host, sampler, durations, core, errors, afters = _parts(path, helper.native_id)
            assert (type(core).__name__, type(sampler.marker).__name__) == (
                ("StepCore", "Marker") if path == "c" else ("PyStepCore", "PyMarker"))
            _workload(core)
            got[path] = (_tables(host, sampler, durations), [e.split(":")[0] for e in errors], afters,
                         sampler.boundary_marks, sampler.reused_marks, durations.seen, sampler.marker.watching())
    finally:
        stop.set()
    c, py = got["c"], got["python"]
    for part in range(5):
        assert c[0][part] == py[0][part], part
    assert c[1:] == py[1:]
    steps, spans, marks, durs, same = c[0]
    me = threading.get_native_id()
    assert [s[1] for s in steps] == [0, 1, 2, 3, 4, 7, 8, 20, 30, 31]
    assert [s[2] for s in steps] == [me] * 8 + [4242, me]
    assert [(s[5], s[6]) for s in steps][:6] == [(8, 100), (8, -1), (8, 100), (8, -1), (-1, -1), (-1, -1)]
    assert steps[6][5:] == (2, -1) and steps[7][5:] == (5, 6)
    # between_steps spans for steps 1, 2, 3, 4 (the follows): each step starts where its span does.
    assert [s[1] for s in spans] == ["between_steps"] * 4
    assert [s[3] for s in spans] == [steps[i][3] for i in (1, 2, 3, 4)]
    assert all(s[2] == me and s[3] < s[4] for s in spans)
    assert all(same) and len(durs) == 10 and durs[4][1:] == (-1, -1)
    assert c[1] == ["step 4"]  # the bad work, reported once
    assert len(c[2]) == 10 and all(ok for _, ok, _passed in c[2][:9])
    # Marks: this thread's at each boundary (running), the launcher's beside each (unknown).
    mine = [m for m in marks if m[1] == me]
    theirs = [m for m in marks if m[1] == helper.native_id]
    assert mine and len(theirs) == len(mine) and all(m[2] == _RUNNING and m[4] for m in mine)
    assert all(m[2] == _UNKNOWN for m in theirs)
    assert c[4] >= 3  # back-to-back starts reused the end mark
    assert c[6] == (helper.native_id,)


@needs_ext
def test_the_recorder_uses_the_c_step_path_and_its_after_only_when_due():
    from workflow_lib.capture import FlightRecorder
    from workflow_lib.capture.trigger import LatencyTrigger

    rec = FlightRecorder(incident_id="sc", sources=("host", "sched"))
    assert type(rec._core).__name__ == "StepCore" and rec._core.after is None  # no trigger, no CUPTI
    rec.trigger = LatencyTrigger()
    assert rec._core.after is not None
    rec.trigger = None
    assert rec._core.after is None
    assert rec.report()["step_path"] == "c"


@needs_ext
def test_c_step_core_refuses_bad_rings():
    ext = cext.step
    host = HostSource(16, 16)
    d = StepDurations(8)
    s, sp = host.steps.cols, host.spans.cols
    cols = (s["step_id"], s["tid"], s["start_ns"], s["end_ns"], s["items"], s["tokens"], s["seq"])
    scols = (sp["start_ns"], sp["end_ns"], sp["code"], sp["seq"])
    with pytest.raises(ValueError):  # mask not capacity - 1
        ext.StepCore(cols, host.steps.ctr, 7, scols, host.spans.ctr, 15, 0, (d.durations, d.items, d.tokens), d.ctr,
                     None, print)
    with pytest.raises(TypeError):  # not a Marker
        ext.StepCore(cols, host.steps.ctr, 15, scols, host.spans.ctr, 15, 0, (d.durations, d.items, d.tokens), d.ctr,
                     object(), print)
    with pytest.raises(TypeError):  # a column that is not int64
        import array
        ext.StepCore(cols[:6] + (array.array("d", [0.0]) * 16,), host.steps.ctr, 15, scols, host.spans.ctr, 15, 0,
                     (d.durations, d.items, d.tokens), d.ctr, None, print)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
@pytest.mark.parametrize("path", ["c", "python"])
def test_after_fork_the_child_steps_and_marks_carry_its_own_tid(path):
    if path == "c" and cext.step is None:
        pytest.skip("C step path not built here")
    host, sampler, durations, core, errors, _ = _parts(path, threading.get_native_id())
    t0 = core.start()
    core.step_end(0, t0, None, None)

    def child():  # its rows must carry its own tid, its mark read its own schedstat
        t0 = core.start()
        core.step_end(5, t0, None, None)
        st, sc = host.steps.copy().columns, sampler.ring.copy().columns
        me = threading.get_native_id()
        return int(st["tid"][np.argmax(st["seq"])]) == me and me in set(sc["tid"].tolist())

    assert in_forked_child(child)


def _recorder_workload(rec):
    for i in range(3):
        with rec.step(i, items=4) as s:
            s.tokens = 10 * i
            with rec.span("fwd"):
                pass
    with rec.step(3):
        rec.pause()  # inside a live step: takes effect at its end
        assert rec._open is not None and rec._open.live
    with rec.step(4):  # paused: not recorded
        rec.resume()  # inside a paused step: waits for its end
    with rec.step(5):  # follows no step (a pause came between)
        pass
    with rec.step(6, items="bad"):
        pass
    for batch in rec.steps([1, 2], start=10, items=1):
        with rec.span("work"):
            pass


@needs_ext
def test_the_recorder_writes_the_same_steps_and_spans_on_both_paths(tmp_path, monkeypatch):
    from workflow_lib.capture import FlightRecorder

    got = {}
    for path in ("c", "python"):
        if path == "python":
            monkeypatch.setattr(step_core, "ext", None)
            monkeypatch.setattr(sched_marks, "ext", None)
        rec = FlightRecorder(incident_id=f"p{path}", incidents_dir=str(tmp_path), sources=("host", "sched")).start()
        assert rec.report()["step_path"] == path
        assert type(rec.step(0)).__module__.endswith("_stepext" if path == "c" else "steps")
        _recorder_workload(rec)
        rec.stop()
        steps, spans, _, durs, same = _tables(rec.host, None, rec.durations)
        got[path] = (steps, spans, durs, same, [e.split(":")[0] for e in rec.errors], rec.paused_intervals() != [])
    assert got["c"] == got["python"]
    steps = got["c"][0]
    assert [s[1] for s in steps] == [0, 1, 2, 3, 5, 6, 10, 11]
    assert [(s[5], s[6]) for s in steps][:3] == [(4, 0), (4, 10), (4, 20)]
    assert got["c"][4] == ["step 6"]
