"""Small builders shared by the capture tests."""

from __future__ import annotations

import os
import time

from workflow_lib.capture import Budget, FlightRecorder

SMALL = Budget(retained_bytes=1 << 20, window_ns=60 * 10**9)


def recorder(tmp_path, **kw) -> FlightRecorder:
    kw.setdefault("incident_id", "t")
    kw.setdefault("incidents_dir", str(tmp_path / "incidents"))
    kw.setdefault("budget", SMALL)
    return FlightRecorder(**kw)


def busy_ms(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def in_forked_child(check) -> bool:
    """`check()` run in a forked child of this process; its truth, told through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, b"1" if check() else b"0")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    return got == b"1"
