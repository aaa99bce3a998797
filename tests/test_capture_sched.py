"""Scheduler evidence: a busy thread accumulates CPU time and shows R; a sleeper shows S."""

from __future__ import annotations

import os
import threading
import time

from workflow_lib.capture.ring import capacity_for
from workflow_lib.capture.sources.sched import SchedSampler, read_task
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder


def test_busy_vs_sleeping_thread():
    stop = threading.Event()
    ids = {}

    def busy():
        ids["busy"] = threading.get_native_id()
        while not stop.is_set():
            pass

    def sleeper():
        ids["sleep"] = threading.get_native_id()
        stop.wait()

    ts = [threading.Thread(target=busy, name="busy"), threading.Thread(target=sleeper, name="sleeper")]
    for t in ts:
        t.start()
    s = SchedSampler(capacity_for(1 << 16, 56))
    try:
        time.sleep(0.05)
        for _ in range(4):
            s.sample_once()
            time.sleep(0.1)
    finally:
        stop.set()
        for t in ts:
            t.join()
    copy = s.ring.copy()
    df = s.table(copy, 0, 2**62).to_pandas()
    b, z = df[df.thread_id == ids["busy"]], df[df.thread_id == ids["sleep"]]
    assert len(b) == 4 and len(z) == 4
    # 0.3 s of spinning; the bar is low because this box is shared (load average ~5 on 2 cores).
    assert b["cpu_time_ns"].iloc[-1] - b["cpu_time_ns"].iloc[0] > 20_000_000
    assert z["cpu_time_ns"].iloc[-1] - z["cpu_time_ns"].iloc[0] < 5_000_000
    assert set(z["state"]) == {"S"}
    assert (b["state"] == "R").sum() >= 2
    assert b["thread_name"].iloc[0] == "busy"
    assert s.manifest_entry(copy)["status"] == "observed"


def test_read_task_handles_names_with_parens_and_vanished_threads():
    me = threading.get_native_id()
    got = read_task(os.getpid(), me)
    assert got is not None and got[0] == "R"
    assert read_task(os.getpid(), 2**31 - 5) is None


def test_unreadable_proc_is_not_observed():
    s = SchedSampler(16, pid=2**31 - 7)
    s.start()
    entry = s.manifest_entry(s.ring.copy())
    assert entry["status"] == "not_observed" and "not readable" in entry["reason"]


def test_sampler_thread_feeds_snapshot(tmp_path):
    rec = recorder(tmp_path, sources=("sched",))
    with rec:
        time.sleep(0.6)
        path = rec.snapshot("manual")
    inc = read_incident(path)
    assert inc.observed("sched")
    df = inc.table("sched").to_pandas()
    assert threading.get_native_id() in set(df["thread_id"])
    assert "stallcase-sched" in set(df["thread_name"])


def test_step_boundaries_also_sample_the_autograd_threads():
    import threading

    from workflow_lib.capture.sources.sched import SchedSampler

    ready, done, tid = threading.Event(), threading.Event(), []

    def autograd_like():
        tid.append(threading.get_native_id())
        with open(f"/proc/self/task/{tid[0]}/comm", "w") as fh:
            fh.write("pt_autograd_0")
        ready.set()
        done.wait(10)

    th = threading.Thread(target=autograd_like, daemon=True)
    th.start()
    ready.wait(10)
    s = SchedSampler(capacity=1024)
    s.mark_current_thread()
    s.mark_current_thread()
    done.set()
    th.join()
    c = s.ring.copy().columns
    mine = c["tid"] == tid[0]
    assert int(mine.sum()) == 2  # one row per step boundary, counters read
    assert (c["cpu"][mine] >= 0).all() and (c["wait"][mine] >= 0).all()
