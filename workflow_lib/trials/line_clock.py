"""When each output line of a run arrived, and how long the run had waited for a CPU by then.

A program's own step-time lines (`ms/batch 12.3`) are wall time. On a machine that other
processes load, a step's wall time is its own time plus the time the program was runnable but
waited for a CPU (the kernel's run-queue delay). Measured on the word_language_model case
(tests/test_word_lm_e2e.py) at a load of 4-6 on 2 cores: a line's wall time per token moved
2x from run to run (11-24 us) while its on-CPU time stayed within 8% (10.9-11.8 us). That wait
is the machine's, not the program's: `trials: {metric: {cpu_wait: removed}}` takes it out of
each line (plan/metric.py), leaving sleeps and I/O waits in.

The wait is the sum of the kernel's per-thread run-queue delay (/proc/<pid>/task/<tid>/schedstat,
second field, ns) over the run's leader and every descendant alive when the line arrived.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ..capture.sources.sched import read_task


def _tasks_wait_ns(pid: int) -> int:
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        task = read_task(pid, int(tid))  # the recorder's reading of a thread (one parse of schedstat)
        if task is not None and task[3] >= 0:
            total += task[3]
    return total


def _children(pid: int) -> list[int]:
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def tree_wait_ns(pid: int) -> int | None:
    """Run-queue ns of `pid` and its live descendants; None where /proc has no schedstat."""
    if not os.path.exists(f"/proc/{pid}/schedstat"):
        return None
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _tasks_wait_ns(p)
        todo += _children(p)
    return total


class LineClock:
    """Copies a run's output pipe to a file, line by line, and notes for each line the wall
    clock (monotonic ns since `start`) and the run's run-queue wait (ns) when it arrived."""

    def __init__(self, pipe, path: Path, pid: int):
        self.pipe, self.path, self.pid = pipe, path, pid
        self.start = time.monotonic_ns()
        self.lines: list[tuple[int, int]] = []
        """(wall ns, wait ns) per line, in order; the wait is -1 where it could not be read"""
        self._thread = threading.Thread(target=self._loop, daemon=True, name="stallcase-lineclock")
        self._thread.start()

    def _loop(self) -> None:
        with open(self.path, "wb") as out:
            for line in iter(self.pipe.readline, b""):
                wait = tree_wait_ns(self.pid)
                # Monotone: a thread that ended took its wait with it (/proc sums live tasks only).
                last = self.lines[-1][1] if self.lines else 0
                self.lines.append((time.monotonic_ns() - self.start, -1 if wait is None or last < 0 else max(wait, last)))
                out.write(line)
        self.pipe.close()

    def join(self, timeout: float) -> list[tuple[int, int]]:
        self._thread.join(timeout)
        return list(self.lines)
