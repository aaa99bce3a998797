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
from . import sched_marks
from .sched_marks import MAX_LAUNCHERS

_STATES = "RSDZTtXxKWPI"
_RUNNING = _STATES.index("R")  # a thread reading its own counters is running
_NULL = -1  # ring sentinel for an unread counter (real counters are >= 0)
_UNKNOWN = ord("?")  # state code of a step-boundary sample of another thread (stat not read)
# Threads that launch GPU work besides the step's own: PyTorch's autograd engine names its
# device threads "pt_autograd_<n>" (c10::setThreadName).
LAUNCHER_NAMES = (b"pt_autograd",)
# The periodic sample keeps each thread's stat and schedstat open and preads them: one
# syscall a file instead of open/read/close. The sample runs Python holding the GIL between
# its syscalls, time the workload's threads cannot run Python (41 threads: 686-880 us of
# thread CPU a sample by path, 333-461 us with the fds kept; benchmarks/step_path_cost.py).
# Two fds a thread, up to this many threads; beyond it, threads are read by path.
MAX_CACHED_TASKS = 2048


def read_task(pid: int, tid: int) -> tuple[str, str, int, int, int] | None:
    """(state, name, cpu_time_ns, runqueue_wait_ns, timeslices) or None if the thread is gone."""
    base = f"/proc/{pid}/task/{tid}/"
    stat_b = _read(base + "stat")
    if stat_b is None:
        return None
    return parse_task(stat_b, _read(base + "schedstat"))


def parse_task(stat_b: bytes, schedstat_b: bytes | None) -> tuple[str, str, int, int, int] | None:
    """read_task's tuple from the bytes of a thread's stat and schedstat (None: unreadable)."""
    stat = stat_b.decode("utf-8", "replace")
    # The name is in parentheses and may itself hold spaces or ')': split at the last ')'.
    lp, rp = stat.find("("), stat.rfind(")")
    if lp < 0 or rp < 0:
        return None
    name = stat[lp + 1:rp]
    rest = stat[rp + 2:].split()
    state = rest[0] if rest else "?"
    cpu = wait = slices = _NULL
    if schedstat_b is not None:
        try:
            parts = schedstat_b.split()
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
        self.paused = False  # set by FlightRecorder.pause(): skip samples, keep the thread
        self._thread: threading.Thread | None = None
        self.native_id: int | None = None
        # The step-boundary marks (sched_marks.py: in C where the extension is built). Other
        # threads that launch the step's GPU work (the autograd engine's backward threads) are
        # sampled at every mark too, found by name every sched_marks.RESCAN step starts (_scan_launchers).
        self.marker = sched_marks.make(self.ring, self._scan_launchers, self._error, _RUNNING, _UNKNOWN)
        self._task_fds: dict[int, tuple[int, int]] = {}  # tid -> (stat fd, schedstat fd or -1)
        self.max_cached_tasks = MAX_CACHED_TASKS  # 0: every file read by path

    @property
    def nbytes(self) -> int:
        return self.ring.nbytes

    @property
    def boundary_marks(self) -> int:
        return self.marker.boundary_marks

    @property
    def reused_marks(self) -> int:
        """Step starts that reused the previous step's end mark."""
        return self.marker.reused_marks

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
        for tid in list(self._task_fds):
            self._forget(tid)

    def _forget(self, tid: int) -> None:
        for fd in self._task_fds.pop(tid, ()):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _read_cached(self, tid: int) -> tuple[str, str, int, int, int] | None:
        """read_task through fds kept open per thread. A failed pread means the thread ended
        (or its tid was reused by a new thread): the fds are dropped and opened once anew."""
        for attempt in (0, 1):
            fds = self._task_fds.get(tid)
            if fds is None:
                if len(self._task_fds) >= self.max_cached_tasks:
                    return read_task(self.pid, tid)
                base = f"/proc/{self.pid}/task/{tid}/"
                try:
                    st = os.open(base + "stat", os.O_RDONLY)
                except OSError:
                    return None  # gone between listing and reading
                try:
                    ss = os.open(base + "schedstat", os.O_RDONLY)
                except OSError:
                    ss = -1  # a kernel without schedstat: counters stay null
                fds = self._task_fds[tid] = (st, ss)
            try:
                stat_b = os.pread(fds[0], 4096, 0)
            except OSError:
                self._forget(tid)
                continue
            sched_b = None
            if fds[1] >= 0:
                try:
                    sched_b = os.pread(fds[1], 128, 0)
                except OSError:
                    sched_b = None
            return parse_task(stat_b, sched_b) if stat_b else None
        return None

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
        A recorded step marks through the recorder's step core, which calls the marker itself.
        """
        self.marker.mark()

    def mark_step_start(self) -> None:
        """The mark at a step's start: skipped when this thread marked (the previous step's
        end) under MARK_REUSE_NS ago, so back-to-back steps share one sample between them."""
        self.marker.mark_start()

    def watch_thread(self, tid: int) -> None:
        """Sample this thread (of the recorded process) at every step boundary as well."""
        if tid in self.marker.watching() or len(self.marker.watching()) >= MAX_LAUNCHERS or self.pid != os.getpid():
            return
        try:
            fd = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
        except OSError:
            return
        if not self.marker.watch(tid, fd):
            os.close(fd)

    def _scan_launchers(self) -> None:
        if self.pid != os.getpid():
            return
        try:
            tids = os.listdir("/proc/self/task")
        except OSError:
            return
        watching = self.marker.watching()
        for t in tids:
            if not (t.isascii() and t.isdigit()) or int(t) in watching:
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
        listed = set()
        for t in tids:
            try:
                tid = int(t)
            except ValueError:
                continue
            listed.add(tid)
            got = self._read_cached(tid)
            if got is None:
                continue
            state, name, cpu, wait, slices = got
            if len(self.names) < 65536:
                self.names[tid] = py_names.get(tid, name)
            code = _STATES.find(state[:1])
            self.ring.append(ts, tid, code if code >= 0 else ord(state[:1] or "?"), cpu, wait, slices)
            n += 1
        for tid in [t for t in self._task_fds if t not in listed]:  # threads that ended
            self._forget(tid)
        self.samples += 1
        return n

    def _error(self, msg: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(msg)

    def _run(self) -> None:
        self.native_id = threading.get_native_id()
        while not self._stop.is_set():
            if self.paused:  # the recorder is paused: the thread stays, the sample is skipped
                self._stop.wait(self.period_s)
                continue
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
                  "step_boundary_samples": self.boundary_marks, "step_starts_sharing_the_end_mark": self.reused_marks,
                  "rows_written": copy.written, "rows_overwritten": copy.overwritten, "backoffs": self.backoffs,
                  "errors": list(self.errors)}
        if self.reason_absent:
            return source("not_observed", self.reason_absent, **detail)
        if self.samples == 0:
            return source("not_observed", "no sample taken yet (recorder stopped before the first sample)" if not self.errors else f"sampler error: {self.errors[0]}", **detail)
        return source("observed", None, **detail)
