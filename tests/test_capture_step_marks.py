"""Every step is bracketed by two scheduler samples of the thread that ran it, even when the
workload holds the GIL for the whole step (the periodic sampler cannot run then)."""

import time

from workflow_lib.capture import Budget, FlightRecorder
from workflow_lib.core.incident import read_incident


def _busy(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def test_steps_are_bracketed_by_samples_of_their_thread(tmp_path):
    rec = FlightRecorder(incident_id="marks", incidents_dir=str(tmp_path), sources=("host", "sched"),
                         budget=Budget(sched_period_s=10.0))  # periodic samples effectively off
    with rec:
        for i in range(5):
            with rec.step(i):
                _busy(20)  # a GIL-holding host gap
        path = rec.snapshot("manual")
    inc = read_incident(path)
    steps = inc.table("steps").to_pandas()
    sched = inc.table("sched").to_pandas()
    tid = int(steps["thread_id"].iloc[0])
    mine = sched[sched.thread_id == tid].sort_values("ts_ns")
    assert inc.manifest["sources"]["sched"]["detail"]["step_boundary_samples"] == 10
    for _, s in steps.iterrows():
        before = mine[mine.ts_ns <= s.start_ns]
        after = mine[mine.ts_ns >= s.end_ns]
        assert len(before) and len(after)
        span = after.ts_ns.iloc[0] - before.ts_ns.iloc[-1]
        assert span <= 2 * (s.end_ns - s.start_ns)
        # the thread spun: its CPU time over the bracket is most of the bracket
        dcpu = after.cpu_time_ns.iloc[0] - before.cpu_time_ns.iloc[-1]
        assert dcpu > 0.5 * span
