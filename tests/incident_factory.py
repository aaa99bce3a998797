"""Build small, real incident directories for tests of snapshot, plan and preflight.

The incident holds a one-file workload (`work.py`, a source artifact under a source
root), an input file, the interpreter as the binary and a copied "library" file, all
recorded by digest exactly as the recorder records them.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pyarrow as pa

from workflow_lib.core import environment
from workflow_lib.core.cas import hash_file
from workflow_lib.core.incident import source, write_incident

WORKLOAD = textwrap.dedent(
    """
    import json, os, sys, time
    delay_ms = float(sys.argv[sys.argv.index("--delay-ms") + 1]) if "--delay-ms" in sys.argv else 1.0
    fail = os.environ.get("TORCH_TEST_FAIL") == "1"
    steps = []
    for i in range(6):
        t = time.perf_counter_ns(); time.sleep(delay_ms / 1000.0); steps.append(time.perf_counter_ns() - t)
    if "--dump-env" in sys.argv:
        open(sys.argv[sys.argv.index("--dump-env") + 1], "w").write(json.dumps(sorted(os.environ)))
    out = os.environ.get("STALLCASE_STEPS_OUT")
    if out and os.environ.get("STALLCASE_TEST_NO_STEPS") != "1":
        open(out, "w").write(json.dumps({"schema_version": 1, "steps_ns": steps, "unusual": []}))
    sys.exit(3 if fail else 0)
    """
)


def art(role: str, path: Path, relpath: str | None = None) -> dict:
    return {"role": role, "path": str(path), "relpath": relpath, "digest": hash_file(path), "size": path.stat().st_size}


def make_incident(root: Path, incident_id: str = "inc1", *, env_fp: dict | None = None, delay_ms: float = 1.0) -> Path:
    """Write src/ (source root), an input, a fake library and the incident directory; return it."""
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "work.py").write_text(WORKLOAD)
    data = root / "data.bin"
    data.write_bytes(b"input-bytes" * 10)
    lib = root / "libfake.so"
    lib.write_bytes(b"\x7fELF fake library")
    artifacts = [art("source", src / "work.py", "work.py"), art("input", data), art("library", lib),
                 art("binary", Path(sys.executable).resolve())]
    manifest = {
        "incident_id": incident_id,
        "reason": "manual",
        "producer": "test",
        "clock": {"host": "monotonic", "unix_minus_host_ns": 0},
        "sources": {"host": source("observed"), "nvml": source("not_observed", "no GPU in tests")},
        "provenance": {"source": {"root": str(src)}, "environment": env_fp if env_fp is not None else environment.fingerprint()},
        "artifacts": artifacts,
        "workload": {"argv": [sys.executable, str(src / "work.py"), "--delay-ms", str(delay_ms)], "cwd": str(src), "env": {}},
    }
    steps = pa.table({"step_id": [0, 1], "thread_id": [1, 1], "start_ns": [0, 10], "end_ns": [10, 20], "rank": pa.nulls(2, pa.int32())})
    path = root / "incidents" / incident_id
    write_incident(path, manifest, {"steps": steps})
    return path


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
