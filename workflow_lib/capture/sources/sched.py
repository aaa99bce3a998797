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

from ...core import arrow
from ..clock import now_ns
from ...core.incident import source
from ..ring import Ring

_STATES = "RSDZTtXxKWPI"
_RUNNING = _STATES.index("R")  # a thread reading its own counters is running
_TLS = threading.local()  # per thread: its tid and an open fd of its own schedstat
_NULL = -1  # ring sentinel for an unread counter (real counters are >= 0)
_UNKNOWN = ord("?")  # state code of a step-boundary sample of another thread (stat not read)
# Threads that launch GPU work besides the step's own: PyTorch's autograd engine names its
# device threads "pt_autograd_<n>" (c10::setThreadName).
LAUNCHER_NAMES = (b"pt_autograd",)
RESCAN = 256  # step boundaries between scans for new launcher threads
MAX_LAUNCHERS = 16


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
        self.boundary_marks = 0
        # Other threads that launch the step's GPU work (the autograd engine's backward
        # threads): sampled at every step boundary too, found by name every RESCAN marks.
        self._launchers: dict[int, int] = {}  # tid -> open fd of its schedstat
        self._marks_since_scan = RESCAN

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

    def mark_current_thread(self) -> None:
        """One sample of the calling thread, now (called at step boundaries).

        The periodic sampler is a Python thread: while the workload holds the GIL (a busy
        host loop, a long Python section) it cannot run, so the samples around exactly the
        gaps that matter can be far apart. The thread that marks a step boundary reads its
        own cumulative counters instead (a pread of an fd kept open per thread, about a
        microsecond), so every step is bracketed by two samples of the thread that ran it.
        """
        try:
            fd = _TLS.fd
        except AttributeError:
            try:
                _TLS.tid = threading.get_native_id()
                _TLS.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError as exc:
                _TLS.fd = -1
                self._error(f"step-boundary sample: {exc.strerror or exc}")
            fd = _TLS.fd
        if fd < 0:
            return
        try:
            cpu, wait, slices = os.pread(fd, 128, 0).split()[:3]
        except (OSError, ValueError) as exc:
            self._error(f"step-boundary sample: {exc}")
            return
        self.ring.append(now_ns(), _TLS.tid, _RUNNING, int(cpu), int(wait), int(slices))
        self.boundary_marks += 1
        self._mark_launchers()

    def watch_thread(self, tid: int) -> None:
        """Sample this thread (of the recorded process) at every step boundary as well."""
        if tid in self._launchers or len(self._launchers) >= MAX_LAUNCHERS or self.pid != os.getpid():
            return
        try:
            self._launchers[tid] = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
        except OSError:
            pass

    def _mark_launchers(self) -> None:
        self._marks_since_scan += 1
        if self._marks_since_scan >= RESCAN:
            self._marks_since_scan = 0
            self._scan_launchers()
        if not self._launchers:
            return
        ts = now_ns()
        for tid, fd in list(self._launchers.items()):
            if tid == _TLS.tid:
                continue
            try:
                cpu, wait, slices = os.pread(fd, 128, 0).split()[:3]
            except (OSError, ValueError):
                os.close(fd)  # the thread ended
                del self._launchers[tid]
                continue
            # State unknown without reading stat (costly): counters are what the diagnosis reads.
            self.ring.append(ts, tid, _UNKNOWN, int(cpu), int(wait), int(slices))

    def _scan_launchers(self) -> None:
        if self.pid != os.getpid():
            return
        try:
            tids = os.listdir("/proc/self/task")
        except OSError:
            return
        for t in tids:
            if not t.isdigit() or int(t) in self._launchers:
                continue
            comm = _read(f"/proc/self/task/{t}/comm")
            if comm and comm.startswith(LAUNCHER_NAMES):
                self.watch_thread(int(t))

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
        state = [_STATES[i] if 0 <= i < len(_STATES) else chr(i) for i in range(max(len(_STATES), 128))]
        tid = c["tid"][keep]
        uniq, inv = np.unique(tid, return_inverse=True)
        names = [self.names.get(int(t)) for t in uniq]

        def nullable(v):
            v = c[v][keep]
            return arrow.numbers(v, mask=v < 0)

        return arrow.table({
            "ts_ns": arrow.numbers(c["ts_ns"][keep]),
            "thread_id": arrow.numbers(tid),
            "thread_name": arrow.strings_at(names, inv),
            "state": arrow.strings_at(state, np.clip(codes, 0, 127)),
            "cpu_time_ns": nullable("cpu"),
            "runqueue_wait_ns": nullable("wait"),
            "timeslices": nullable("slices"),
        })

    def manifest_entry(self, copy) -> dict:
        detail = {"pid": self.pid, "period_s": self.period_s, "samples": self.samples,
                  "step_boundary_samples": self.boundary_marks,
                  "rows_written": copy.written, "rows_overwritten": copy.overwritten, "backoffs": self.backoffs,
                  "errors": list(self.errors)}
        if self.reason_absent:
            return source("not_observed", self.reason_absent, **detail)
        if self.samples == 0:
            return source("not_observed", "no sample taken yet (recorder stopped before the first sample)" if not self.errors else f"sampler error: {self.errors[0]}", **detail)
        return source("observed", None, **detail)
