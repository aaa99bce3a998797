"""Child processes for tests/test_faults.py: each does one real stallcase write and can be
told to pause at a chosen point (touching MARKER first) so the parent can SIGKILL it there.

    python tests/fault_children.py cas-put SRC ROOT [--pause-mid-copy MARKER]
    python tests/fault_children.py snapshot INCIDENTS ID [--pause-before-manifest MARKER | --pause-mid-table MARKER]
    python tests/fault_children.py trials PLAN PREFLIGHT BLOCK STORE WORK OUT LOG
    python tests/fault_children.py compare PLAN OUT EXEC... [--pause-before-rename MARKER]

Pauses sleep far longer than any test waits: the parent kills the child while it sleeps,
so the kill lands at exactly that point of the write.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PAUSE_S = 600


def _flag(argv: list[str], name: str) -> str | None:
    if name in argv:
        i = argv.index(name)
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return None


def _pause(marker: str) -> None:
    Path(marker).write_text(str(os.getpid()))
    time.sleep(PAUSE_S)


def cas_put(argv: list[str]) -> None:
    from workflow_lib.core import cas

    marker = _flag(argv, "--pause-mid-copy")
    if marker:
        def half_copy(src, dst):
            # The kernel copy is too fast to kill reliably mid-way: copy half, then stop there.
            data = Path(src).read_bytes()
            with open(dst, "wb") as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
                _pause(marker)
                fh.write(data[len(data) // 2:])
        cas.shutil.copyfile = half_copy
    src, root = argv
    print(cas.CAS(root).put_file(src))


def snapshot(argv: list[str]) -> None:
    from workflow_lib.core import incident, tables
    from workflow_lib.capture import Budget, FlightRecorder
    from workflow_lib.capture import writer as W

    before_manifest = _flag(argv, "--pause-before-manifest")
    mid_table = _flag(argv, "--pause-mid-table")
    incidents, incident_id = argv
    if before_manifest:
        real = incident.records.write_record

        def hang_then_write(path, record, kind):
            if kind == "incident_manifest":
                _pause(before_manifest)
            return real(path, record, kind)
        incident.records.write_record = hang_then_write
    if mid_table:
        real_write = tables._write_parquet

        def hang_mid(table, dest):
            real_write(table, dest)
            with open(dest, "r+b") as fh:  # the temp file, half written
                fh.truncate(os.path.getsize(dest) // 2)
            _pause(mid_table)
        tables._write_parquet = hang_mid
    W.write_incident = incident.write_incident
    rec = FlightRecorder(incident_id=incident_id, incidents_dir=incidents, sources=("host",),
                         budget=Budget(retained_bytes=1 << 20, window_ns=60 * 10**9))
    with rec:
        for i in range(20):
            with rec.step(i):
                with rec.span("work"):
                    time.sleep(0.001)
        path = rec.snapshot("manual", wait=True)
    if path is None:
        raise SystemExit(f"snapshot failed: {rec.errors}")
    print(path)


def trials(argv: list[str]) -> None:
    from workflow_lib.trials import rule as T

    plan, pre, block, store, work, out, log = argv
    T.run(plan, pre, block, store, work, out, log_path=log)


def compare(argv: list[str]) -> None:
    from workflow_lib.core import atomic
    from workflow_lib.compare import rule as C

    marker = _flag(argv, "--pause-before-rename")
    if marker:
        real_fsync = atomic.os.fsync

        def hang_fsync(fd):
            real_fsync(fd)
            _pause(marker)
        atomic.os.fsync = hang_fsync
    plan, out, *executions = argv
    C.run(plan, executions, out)


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    {"cas-put": cas_put, "snapshot": snapshot, "trials": trials, "compare": compare}[what](rest)
