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
    detail = inc.manifest["sources"]["sched"]["detail"]
    # A step that starts at once after the previous one's end shares that end mark (the main
    # thread can lose the GIL to the sampler thread at a mark's pread, so not always): every
    # end and the first start are marked, each other start marked or shared.
    shared = detail["step_starts_sharing_the_end_mark"]
    assert detail["step_boundary_samples"] + shared == 10 and 0 <= shared <= 4
    for _, s in steps.iterrows():
        before = mine[mine.ts_ns <= s.start_ns]
        after = mine[mine.ts_ns >= s.end_ns]
        assert len(before) and len(after)
        span = after.ts_ns.iloc[0] - before.ts_ns.iloc[-1]
        assert span <= 2 * (s.end_ns - s.start_ns)
        # The samples are the step's own thread's: over the bracket it spun, so it ran (CPU time
        # grew), and its CPU time fits inside the bracket. The run-queue wait need not: schedstat adds
        # a wait to run_delay when the wait ends, so a wait that began before the bracket's first
        # sample is counted whole inside it (35.8 ms in a 24 ms bracket beside two CPU hogs). How the bracket
        # splits between CPU, run queue and GIL waits is the machine's load, not the recorder's
        # (on a machine busy with other jobs the thread got 4 ms of CPU in a 52 ms bracket).
        dcpu = after.cpu_time_ns.iloc[0] - before.cpu_time_ns.iloc[-1]
        drq = after.runqueue_wait_ns.iloc[0] - before.runqueue_wait_ns.iloc[-1]
        tick = 10_000_000  # schedstat and CPU time are accounted at scheduler ticks (<= 10 ms)
        assert 0 < dcpu <= span + tick and drq >= 0


def test_a_step_after_a_gap_takes_its_own_start_mark_and_every_boundary_has_a_near_sample(tmp_path):
    from workflow_lib.capture.sources.sched_marks import MARK_REUSE_NS

    rec = FlightRecorder(incident_id="gap", incidents_dir=str(tmp_path), sources=("host", "sched"),
                         budget=Budget(sched_period_s=10.0))
    with rec:
        for i in range(6):
            if i % 2:
                time.sleep(0.002)  # a gap between steps, far over MARK_REUSE_NS
            with rec.step(i):
                _busy(2)
        path = rec.snapshot("manual")
    inc = read_incident(path)
    detail = inc.manifest["sources"]["sched"]["detail"]
    # Steps 1, 3, 5 follow a 2 ms sleep: their starts are marked; 2 and 4 may share.
    shared = detail["step_starts_sharing_the_end_mark"]
    assert detail["step_boundary_samples"] + shared == 12 and shared <= 2
    steps = inc.table("steps").to_pandas()
    sched = inc.table("sched").to_pandas()
    mine = sched[sched.thread_id == int(steps["thread_id"].iloc[0])].sort_values("ts_ns")
    ts, rq = mine.ts_ns.to_numpy(), mine.runqueue_wait_ns.to_numpy()
    for _, s in steps.iterrows():  # the diagnosis' rule (diagnose/evidence.step_sched)
        tol = max((s.end_ns - s.start_ns) // 10, 200_000)
        for b in (s.start_ns, s.end_ns):
            d = abs(ts - b).min()
            if d <= tol:
                continue
            # Further only when the scheduler took the CPU between the clock read and the mark
            # (the suite's other worker did, once, for 206 us): the thread's run-queue wait over
            # the samples around the boundary covers the excess, so the gap is not the recorder's.
            i = int(ts.searchsorted(b))
            assert 0 < i < len(ts) and rq[i] - rq[i - 1] >= d - tol, (b, d, tol)
    spans = inc.table("spans").to_pandas()
    waits = spans[spans.name == "between_steps"]
    assert len(waits) == 5
    # Each wait between steps has a sample at both of its ends: within MARK_REUSE_NS at most ends,
    # and always within one preemption of the thread between a mark and the span's own clock read
    # (measured: 180 us beside the suite's other worker, 2.16 ms beside two CPU hogs on 2 cores;
    # the scheduler's slice under such load is a few ms, so 10 ms bounds one preemption).
    dist = [abs(ts - b).min() for _, w in waits.iterrows() for b in (w.start_ns, w.end_ns)]
    assert max(dist) <= 10_000_000, dist
    assert sum(d <= MARK_REUSE_NS for d in dist) >= 0.8 * len(dist), dist
