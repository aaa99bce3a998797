"""A machine no other test loads, for the few sections of end-to-end tests whose result is a
measured noise floor or a verdict's size (issue 35's targets are defined on such a machine).

The suite runs on two xdist workers (pyproject's `-n 2`): the end-to-end tests one after
another on one of them, everything else on the other (tests/conftest.py). On a 2-core machine
the other worker's tests are run-queue wait, cache and memory traffic for a timed program:
the word-LM's per-token floor was ±7.8-10.3% with them beside it and ±3.3% without, the same
design (docs/trials.md, "Work per step"). So a timed section takes the machine for itself:

- every test outside the serial scope holds a shared lock for its whole run (setup, call,
  teardown: tests/conftest.py's pytest_runtest_protocol);
- a timed section (`quiet_machine()`) takes the lock exclusively: it waits for the test the
  other worker is running to end, and the other worker starts no new test until it is done.

Writer-preferring (flock has no fairness): a reader passes a gate first, which a waiting writer
holds, so a stream of short tests cannot starve the timed section. Without xdist (`-n 0`, one
process) both are no-ops: nothing else runs beside the test.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

# The controller makes the directory and hands it to each worker (conftest's pytest_configure_node).
WORKERINPUT_KEY = "stallcase_quiet_lock_dir"
_DIR: Path | None = None


def set_lock_dir(path: str | None) -> None:
    global _DIR
    _DIR = Path(path) if path else None


def _open(name: str) -> int:
    assert _DIR is not None
    return os.open(_DIR / name, os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.contextmanager
def shared():
    """Held by a test that may run beside a timed section's program (not one of the serial scope)."""
    if _DIR is None:
        yield
        return
    gate, main = _open("gate"), _open("main")
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)  # blocks while a timed section waits or runs
        fcntl.flock(main, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        os.close(main)  # closing drops the locks
        os.close(gate)


@contextlib.contextmanager
def quiet_machine(what: str):
    """The machine to this section alone: no test of the other worker runs meanwhile."""
    if _DIR is None:
        yield
        return
    gate, main = _open("gate"), _open("main")
    t0 = time.monotonic()
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX)
        waited = time.monotonic() - t0
        t1 = time.monotonic()
        yield
        # One line per section, which the controller prints at the end (conftest's terminal summary).
        with open(_DIR / "log", "a", encoding="utf-8") as f:
            f.write(f"{what}: waited {waited:.1f} s for the other worker's test, held {time.monotonic() - t1:.1f} s\n")
    finally:
        os.close(main)
        os.close(gate)


def summary(lock_dir: str | None) -> list[str]:
    """The sections' lines, for the controller's terminal summary."""
    path = Path(lock_dir) / "log" if lock_dir else None
    return path.read_text(encoding="utf-8").splitlines() if path and path.exists() else []
