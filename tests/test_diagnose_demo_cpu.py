"""The built-in demo on a CPU-only machine: its diagnosis explains its steps, and its slow
steps' excess, from observed host-only evidence, labelled as such (nothing synthesized)."""

import subprocess
import sys
from pathlib import Path

from workflow_lib.report.text import slow_step_lines
from workflow_lib.diagnose import diagnose_dir

ROOT = Path(__file__).resolve().parents[1]


def test_demo_on_cpu_is_explained_from_host_only_evidence(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "", "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, str(ROOT / "examples/demo/workload.py"), "--steps", "8", "--size", "64",
                        "--incidents-dir", str(tmp_path), "--incident", "demo"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rec = diagnose_dir(tmp_path / "demo")
    gpu = [n for n in ("kernels", "cupti") if (rec["sources"].get(n) or {}).get("status") == "observed"]
    assert not gpu and not any(s["busy_ns"] for s in rec["steps"])  # CPU-only: no GPU activity observed
    for s in rec["steps"]:
        assert s["explained_ns"] >= 0.9 * s["wall_ns"], s["step_id"]
        labelled = [f for f in s["findings"] if f["verdict"] == "attributed"]
        assert labelled and all(f["evidence"].get("basis", "").startswith("host-only") for f in labelled)
    assert {f["check"] for s in rec["steps"] for f in s["findings"] if f["explains_ns"]} <= {"host_work", "input_starvation"}
    for st in rec["summary"]["slow_steps"]:
        assert sum(st["by_cause"].values()) >= 0.8 * st["excess_ns"]
    assert "host-only evidence" in slow_step_lines(rec)[0] or not rec["summary"]["slow_steps"]
