"""Scheduler evidence: per-thread state, CPU time and run-queue wait, sampled from /proc.

`/proc/<pid>/task/<tid>/stat` gives the state letter (field 3) and the thread name;
`/proc/<pid>/task/<tid>/schedstat` gives cumulative on-CPU ns, run-queue wait ns and
timeslices. Rows are written only for what was read: a thread that vanished between
listing and reading is skipped, a missing schedstat (kernel without schedstats) leaves
the counters null.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow as pa

from ..clock import now_ns
from ...incident import source
from ..ring import Ring

_STATES = "RSDZTtXxKWPI"
_NULL = -1  # ring sentinel for an unread counter (real counters are >= 0)


def read_task(pid: int, tid: int) -> tuple[str, str, int, int, int] | None:
    """(state, name, cpu_time_ns, runqueue_wait_ns, timeslices) or None if the thread is gone."""
    base = f"/proc/{pid}/task/{tid}/"
    stat_b = _read(base + "stat")
    if stat_b is None:
        return None
    stat = stat_b.decode("utf-8", "replace")
    # The name is in parentheses and may itself hold spaces or ')': split at the last ')'.
    lp, rp = stat.find("("), stat.rfind(")")
    if lp < 0 or rp < 0:
        return None
    name = stat[lp + 1:rp]
    rest = stat[rp + 2:].split()
    state = rest[0] if rest else "?"
    cpu = wait = slices = _NULL
    raw = _read(base + "schedstat")
    if raw is not None:
        try:
            parts = raw.split()
            cpu, wait, slices = int(parts[0]), int(parts[1]), int(parts[2])
        except (ValueError, IndexError):
            pass
    return state, name, cpu, wait, slices


def _read(path: str) -> bytes | None:
    # os-level calls: a Python file object costs several times more, and this runs
    # for every thread of the workload while holding the GIL.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


class SchedSampler:
    """Samples every thread of `pid` every `period_s` (0.5 s: a 100-thread process costs
    ~0.6 ms of GIL-held reading per sample) on a daemon thread."""

    def __init__(self, capacity: int, pid: int | None = None, period_s: float = 0.5, max_period_s: float = 8.0):
        self.pid = pid or os.getpid()
        self.period_s = period_s
        self.base_period_s = period_s
        self.max_period_s = max_period_s
        self.ring = Ring("sched", {"ts_ns": "q", "tid": "q", "state": "q", "cpu": "q", "wait": "q", "slices": "q"}, capacity)
        self.names: dict[int, str] = {}
        self.errors: list[str] = []
        self.samples = 0
        self.backoffs = 0
        self.reason_absent: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.native_id: int | None = None

    @property
    def nbytes(self) -> int:
        return self.ring.nbytes

    def start(self) -> None:
        if not os.path.isdir(f"/proc/{self.pid}/task"):
            self.reason_absent = f"/proc/{self.pid}/task not readable (not Linux, or permission denied)"
            return
        self._thread = threading.Thread(target=self._run, name="stallcase-sched", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def back_off(self) -> bool:
        """Double the period (up to the maximum); True if it changed."""
        if self.period_s >= self.max_period_s:
            return False
        self.period_s = min(self.period_s * 2, self.max_period_s)
        self.backoffs += 1
        return True

    def sample_once(self) -> int:
        """Read every thread once; returns rows written."""
        ts = now_ns()
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError as exc:
            self._error(f"listing /proc/{self.pid}/task: {exc.strerror or exc}")
            return 0
        n = 0
        # Python thread names are not OS names before 3.14: prefer them for our own process.
        py_names = {th.native_id: th.name for th in threading.enumerate()} if self.pid == os.getpid() else {}
        for t in tids:
            try:
                tid = int(t)
            except ValueError:
                continue
            got = read_task(self.pid, tid)
            if got is None:
                continue
            state, name, cpu, wait, slices = got
            if len(self.names) < 65536:
                self.names[tid] = py_names.get(tid, name)
            code = _STATES.find(state[:1])
            self.ring.append(ts, tid, code if code >= 0 else ord(state[:1] or "?"), cpu, wait, slices)
            n += 1
        self.samples += 1
        return n

    def _error(self, msg: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(msg)

    def _run(self) -> None:
        self.native_id = threading.get_native_id()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as exc:  # never let a sampler bug reach the host application
                self._error(f"sched sampler: {type(exc).__name__}: {exc}")
            self._stop.wait(self.period_s)

    def table(self, copy, since_ns: int, until_ns: int) -> pa.Table:
        c = copy.columns
        keep = (c["ts_ns"] >= since_ns) & (c["ts_ns"] <= until_ns)
        codes = c["state"][keep]
        state = np.array([_STATES[i] if 0 <= i < len(_STATES) else chr(i) for i in range(max(len(_STATES), 128))], dtype=object)
        tid = c["tid"][keep]
        names = np.array([self.names.get(int(t)) for t in np.unique(tid)], dtype=object)
        uniq, inv = np.unique(tid, return_inverse=True)

        def nullable(v):
            v = c[v][keep]
            return pa.array(v, pa.int64(), mask=v < 0)

        return pa.table({
            "ts_ns": pa.array(c["ts_ns"][keep], pa.int64()),
            "thread_id": pa.array(tid, pa.int64()),
            "thread_name": pa.array(names[inv] if len(uniq) else [], pa.string()),
            "state": pa.array(state[np.clip(codes, 0, 127)], pa.string()),
            "cpu_time_ns": nullable("cpu"),
            "runqueue_wait_ns": nullable("wait"),
            "timeslices": nullable("slices"),
        })

    def manifest_entry(self, copy) -> dict:
        detail = {"pid": self.pid, "period_s": self.period_s, "samples": self.samples,
                  "rows_written": copy.written, "rows_overwritten": copy.overwritten, "backoffs": self.backoffs,
                  "errors": list(self.errors)}
        if self.reason_absent:
            return source("not_observed", self.reason_absent, **detail)
        if self.samples == 0:
            return source("not_observed", "no sample taken yet (recorder stopped before the first sample)" if not self.errors else f"sampler error: {self.errors[0]}", **detail)
        return source("observed", None, **detail)
