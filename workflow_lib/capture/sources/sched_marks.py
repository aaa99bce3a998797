"""Step-boundary sched marks: the thread that runs a step samples its own schedstat at the
step's start and end (SchedSampler.mark_current_thread says why).

Two paths write the same rows: the C `Marker` (_stepext.c; what a recorded step uses where the
extension is built, so a mark runs no Python bytecode) and `PyMarker` below (the fallback, and
the rules' reference). `make` picks one. The rare work stays in Python and is called back:
the scan for launcher threads (sched.py) and the error log.

The schedstat pread is about a microsecond and keeps the GIL on both paths: releasing it hands
the GIL to whichever thread waits for it (on the H200 loop a DataLoader's pin-memory thread
holds it 18% of the time), and the step would wait far longer than the read.
"""

from __future__ import annotations

import os
import threading

from ..cext import step as ext
from ..clock import now_ns

# Step starts between scans for new launcher threads. A scan (list the threads, read their
# names) takes longer than a mark, so it runs before a step's start sample, never between
# that sample and the step's start time (nor after a step's end sample).
RESCAN = 128
MAX_LAUNCHERS = 16  # the C Marker's fixed table holds as many
# A step that starts within this long of its thread's last boundary mark (the previous
# step's end, when steps follow each other) reuses that mark as its start sample instead of
# taking another: the two would be microseconds apart. The diagnosis takes the sample
# nearest a boundary within max(10% of the step, 200 us) (diagnose/evidence.step_sched), so
# 20 us moves no step out of reach; it halves the marks of back-to-back steps.
MARK_REUSE_NS = 20_000

_TLS = threading.local()  # per thread: .tid and .fd, its own schedstat kept open (Python path)


def _reset_after_fork() -> None:
    # The child's threads have other ids, and the parent's fds read the parent's threads.
    global _TLS
    _TLS = threading.local()
    if ext is not None:
        ext.after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)


def _schedstat(fd: int) -> tuple[int, int, int]:
    cpu, wait, slices = os.pread(fd, 128, 0).split()[:3]
    return int(cpu), int(wait), int(slices)


class PyMarker:
    """The Python marks; the C `Marker`'s constructor and methods, the same rows."""

    def __init__(self, cols, ctr, mask, scan, on_error, rescan, reuse_ns, running, unknown):
        self._ring = (ctr, mask, *cols)
        self._scan, self._on_error = scan, on_error
        self._rescan, self._reuse_ns = rescan, reuse_ns
        self._running, self._unknown = running, unknown
        self.boundary_marks = 0
        self.reused_marks = 0
        self.scanned = False
        self._starts_since_scan = rescan  # the first step start scans
        self._last = threading.local()  # .ns: this thread's last boundary mark
        self._launchers: dict[int, int] = {}  # tid -> open fd of its schedstat

    def _write(self, ts: int, tid: int, state: int, cpu: int, wait: int, slices: int) -> None:
        """One row, as `Ring.append` writes it (seq last: the commit mark), without its loop."""
        ctr, mask, c_ts, c_tid, c_state, c_cpu, c_wait, c_slices, c_seq = self._ring
        k = next(ctr)
        j = k & mask
        c_ts[j] = ts
        c_tid[j] = tid
        c_state[j] = state
        c_cpu[j] = cpu
        c_wait[j] = wait
        c_slices[j] = slices
        c_seq[j] = k

    def _scan_now(self) -> None:
        self.scanned = True
        try:
            self._scan()
        except Exception as exc:
            self._on_error(f"launcher scan: {type(exc).__name__}: {exc}")

    def mark(self) -> None:
        try:
            fd = _TLS.fd
        except AttributeError:
            _TLS.tid = threading.get_native_id()
            try:
                _TLS.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError as exc:
                _TLS.fd = -1
                self._on_error(f"step-boundary sample: {exc.strerror or exc}")
            fd = _TLS.fd
        if fd < 0:
            return
        if not self.scanned:  # a first mark outside a step start: scan before sampling
            self._scan_now()
        try:
            cpu, wait, slices = _schedstat(fd)
        except (OSError, ValueError) as exc:
            self._on_error(f"step-boundary sample: {exc}")
            return
        ts = now_ns()
        tid = _TLS.tid
        self._write(ts, tid, self._running, cpu, wait, slices)
        self._last.ns = ts
        self.boundary_marks += 1
        if self._launchers:
            self._mark_launchers(tid)

    def mark_start(self) -> None:
        self._starts_since_scan += 1
        if self._starts_since_scan >= self._rescan:
            self._starts_since_scan = 0
            self._scan_now()
            self._last.ns = None  # the scan took time: this start takes its own sample
        last = getattr(self._last, "ns", None)
        if last is not None and now_ns() - last < self._reuse_ns:
            self.reused_marks += 1
            return
        self.mark()

    def _mark_launchers(self, self_tid: int) -> None:
        ts = now_ns()
        for tid, fd in list(self._launchers.items()):
            if tid == self_tid:
                continue
            try:
                cpu, wait, slices = _schedstat(fd)
            except (OSError, ValueError):
                os.close(fd)  # the thread ended
                del self._launchers[tid]
                continue
            # State unknown without reading stat (costly): counters are what the diagnosis reads.
            self._write(ts, tid, self._unknown, cpu, wait, slices)

    def watch(self, tid: int, fd: int) -> bool:
        """Sample thread `tid` at every mark too, through `fd` (the marker owns it now)."""
        if tid in self._launchers or len(self._launchers) >= MAX_LAUNCHERS:
            return False
        self._launchers[tid] = fd
        return True

    def watching(self) -> tuple[int, ...]:
        return tuple(self._launchers)


def make(ring, scan, on_error, running: int, unknown: int, path: str | None = None, reuse_ns: int = MARK_REUSE_NS):
    """The marker of a sched ring: C where the extension is built, else Python (`path`
    "python" or "c" forces one, and `reuse_ns` widens the reuse: tests compare the paths on a
    loaded machine)."""
    cls = PyMarker if (path or ("c" if ext is not None else "python")) == "python" else ext.Marker
    c = ring.cols
    cols = (c["ts_ns"], c["tid"], c["state"], c["cpu"], c["wait"], c["slices"], c["seq"])
    return cls(cols, ring.ctr, ring.mask, scan, on_error, RESCAN, reuse_ns, running, unknown)
