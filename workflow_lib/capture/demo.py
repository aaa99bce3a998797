"""The built-in demo incident: run examples/demo/workload.py under the recorder.

The rule `capture_demo` (rules/capture.smk) runs it. The workload is started as an argv list with this
interpreter, and snapshots itself into <incidents_dir>/demo at its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..core.errors import StallcaseError
from ..core.incident import MANIFEST

WORKLOAD = Path(__file__).resolve().parents[2] / "examples" / "demo" / "workload.py"


def capture(incidents_dir: str | os.PathLike, args: list[str], log_path: str | os.PathLike | None = None,
            incident_id: str = "demo") -> Path:
    argv = [sys.executable, str(WORKLOAD), *map(str, args), "--incident", incident_id,
            "--incidents-dir", str(Path(incidents_dir).resolve())]
    # One BLAS/OpenMP thread: the demo measures a queue stall, not BLAS thread scheduling, and
    # spinning BLAS threads on a job given one CPU (a SLURM block) distort every run. These
    # variables are allow-listed, so the plan records them and every trial run gets them too.
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    # The demo's program is its own directory (examples/demo): the recorder it imports is the
    # installed stallcase, not part of the program under test, and a checkout inside another git
    # work tree would otherwise pin that repository's files.
    env.setdefault("STALLCASE_SOURCE_ROOT", str(WORKLOAD.parent))
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=WORKLOAD.parent.parent.parent, env=env)
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text(proc.stdout + proc.stderr, encoding="utf-8")
    manifest = Path(incidents_dir) / incident_id / MANIFEST
    if proc.returncode != 0 or not manifest.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise StallcaseError(WORKLOAD, f"demo capture failed (exit {proc.returncode}): {last}")
    return manifest
