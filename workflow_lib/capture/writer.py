"""Background snapshot writer: builds tables and provenance and writes the incident.

The host thread only copies rings and enqueues a job; everything slow (Arrow tables,
digests, Parquet, fsync) happens here. At most `max_concurrent` jobs are in flight;
`submit` refuses more (the caller counts them as dropped). Every failure (disk full,
read-only directory, a bug) is caught, recorded and counted; nothing is raised into
the host application. Between jobs the thread runs the recorder's housekeeping
(target checks) once a second.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Callable

from ..core import incident as _incident
from . import ranks

# The one binding through which incidents reach the disk; tests substitute it to
# simulate a full disk.
write_incident = _incident.write_incident
HOUSEKEEPING_S = 1.0


class Job:
    """One snapshot: `build()` returns (path, manifest, tables) or raises. `write(path, manifest,
    tables)`, when given, writes it and returns the directory it chose (a rank's snapshot
    merges into its incident: capture/ranks.py); by default write_incident at `path`."""

    def __init__(self, build: Callable[[], tuple], write: Callable[..., object] | None = None):
        self.build = build
        self.write = write
        self.done = threading.Event()
        self.path = None
        self.error: str | None = None


def write_incident_now(path, manifest, tables):
    """write_incident looked up at call time (tests substitute the module binding)."""
    return write_incident(path, manifest, tables)


class SnapshotWriter:
    def __init__(self, max_concurrent: int, housekeeping: Callable[[], None] | None = None):
        self.max_concurrent = max_concurrent
        self.housekeeping = housekeeping
        self._q: queue.Queue = queue.Queue()
        self._in_flight = 0
        self._lock = threading.Lock()
        self._slot = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.errors: list[str] = []
        self.error_count = 0
        self.written = 0
        self.native_id: int | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="stallcase-writer", daemon=True)
        self._thread.start()

    def try_reserve(self, timeout_s: float = 0.0) -> bool:
        """Claim a write slot; False when max_concurrent writes stay in flight for timeout_s.

        Automatic triggers pass 0 (drop at once); an explicit snapshot may wait its turn,
        which still never puts more than max_concurrent incidents in flight.
        """
        with self._slot:
            if self._in_flight >= self.max_concurrent and timeout_s > 0:
                self._slot.wait_for(lambda: self._in_flight < self.max_concurrent, timeout=timeout_s)
            if self._in_flight >= self.max_concurrent:
                return False
            self._in_flight += 1
            return True

    def release(self) -> None:
        with self._slot:
            self._in_flight -= 1
            self._slot.notify_all()

    def submit(self, job: Job) -> None:
        """Enqueue a job whose slot was reserved with try_reserve()."""
        if self._thread is None or not self._thread.is_alive():
            # Writer not running (recorder stopped): write on this thread, still guarded.
            self._do(job)
            return
        self._q.put(job)

    def record_error(self, msg: str) -> None:
        with self._lock:
            self.error_count += 1
            if len(self.errors) < 50:
                self.errors.append(msg)

    def _do(self, job: Job) -> None:
        try:
            path, manifest, tables = job.build()
            if job.write is None:
                write_incident(path, manifest, tables)
            else:
                try:
                    path = job.write(path, manifest, tables)
                except ranks.Relocated as exc:  # written, but apart from the other ranks: say so
                    path = exc.path
                    self.record_error(str(exc))
                    print(f"stallcase recorder: {exc}", file=sys.stderr)
            job.path = path
            self.written += 1
        except OSError as exc:
            job.error = f"writing snapshot: {exc.strerror or exc} ({getattr(exc, 'filename', None) or ''})".strip()
            self.record_error(job.error)
        except Exception as exc:  # never into the host application
            job.error = f"writing snapshot: {type(exc).__name__}: {exc}"
            self.record_error(job.error)
        finally:
            self.release()
            job.done.set()

    def _run(self) -> None:
        self.native_id = threading.get_native_id()
        while True:
            try:
                job = self._q.get(timeout=HOUSEKEEPING_S)
            except queue.Empty:
                job = None
            if job is not None:
                self._do(job)
            elif self._stop.is_set():
                return
            if self.housekeeping is not None:
                try:
                    self.housekeeping()
                except Exception as exc:
                    self.record_error(f"housekeeping: {type(exc).__name__}: {exc}")

    def stop(self, timeout_s: float = 60.0) -> None:
        """Finish queued jobs, then end the thread."""
        self._stop.set()
        if self._thread is not None:
            self._q.put(None)
            self._thread.join(timeout=timeout_s)
