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


def _helper_thread():
    started, done, tid = threading.Event(), threading.Event(), []

    def run():
        tid.append(threading.get_native_id())
        started.set()
        done.wait(10)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    started.wait(10)
    return th, done, tid[0]


def _wait_gone(tid: int) -> None:
    """The OS thread ends a little after join() returns: wait until /proc no longer lists it."""
    deadline = time.monotonic() + 10
    while str(tid) in os.listdir("/proc/self/task"):
        assert time.monotonic() < deadline, f"thread {tid} still listed 10 s after join()"
        time.sleep(0.01)


def test_periodic_sample_reads_through_kept_fds_and_drops_those_of_ended_threads():
    th, done, tid = _helper_thread()
    s = SchedSampler(capacity=4096)
    fds_before = len(os.listdir("/proc/self/fd"))
    assert s.sample_once() >= 2
    assert tid in s._task_fds and threading.get_native_id() in s._task_fds
    c = s.ring.copy().columns
    mine = c["tid"] == tid
    assert int(mine.sum()) == 1 and c["cpu"][mine][0] >= 0 and c["wait"][mine][0] >= 0
    # The kept fds read what a fresh open reads: the same name, counters not running backwards.
    again = read_task(os.getpid(), tid)
    assert again is not None and again[2] >= int(c["cpu"][mine][0])
    assert s.names[tid] == again[1] or s.names[tid].startswith("Thread")
    done.set()
    th.join()
    _wait_gone(tid)
    s.sample_once()  # the ended thread: no row, its fds closed
    c = s.ring.copy().columns
    assert int((c["tid"] == tid).sum()) == 1
    assert tid not in s._task_fds
    s.stop()
    assert s._task_fds == {} and len(os.listdir("/proc/self/fd")) <= fds_before


def test_a_stale_kept_fd_is_dropped_and_the_thread_read_anew():
    th, done, dead = _helper_thread()
    stale = os.open(f"/proc/self/task/{dead}/stat", os.O_RDONLY)
    done.set()
    th.join()  # the OS thread ends a little after join() returns: wait until `stale` fails,
    deadline = time.monotonic() + 10  # as an fd of an ended thread (or a reused tid) does
    while time.monotonic() < deadline:
        try:
            os.pread(stale, 4096, 0)
        except OSError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the helper thread's stat stayed readable for 10 s")
    me = threading.get_native_id()
    s = SchedSampler(capacity=1024)
    s._task_fds[me] = (stale, -1)
    got = s._read_cached(me)
    assert got is not None and got[2] >= 0  # read anew, schedstat included
    st, ss = s._task_fds[me]
    assert ss >= 0 and os.pread(st, 4096, 0).startswith(f"{me} (".encode())  # the fds now kept are this thread's
    s.stop()
