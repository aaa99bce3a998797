"""A CPU-only program nobody here wrote for us, recorded from outside while another process
spins on its CPU (issue 34's Must-show): `stallcase record --step-pattern ... -- python prog.py`
(no stallcase import, no GPU), two spinners pinned to the program's one CPU. The diagnosis must
attribute cpu_contention from the scheduler's run-queue evidence, rank it first, and give no
GPU advice. The spinners are started and stopped here, by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.diagnose import diagnose_dir

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CPU = "0"
STEPS = 70
PROGRAM = '''
import time

def work(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s

for step in range(STEPS):
    t0 = time.perf_counter()
    work(150_000)
    print(f"step {step} took {(time.perf_counter() - t0) * 1e3:.3f} ms", flush=True)
'''.replace("STEPS", str(STEPS))
PATTERN = r"step (?P<step>\d+) took (?P<ms>[0-9.]+) ms"


def test_cpu_only_program_beside_spinners_is_cpu_contention_ranked_first(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    assert "stallcase" not in PROGRAM
    spin = [subprocess.Popen(["taskset", "-c", CPU, sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(2)]
    try:
        rec = subprocess.run([sys.executable, "-m", "workflow_lib.cli", "record", "--incident", "cpuonly",
                              "--incidents-dir", str(tmp_path / "incidents"), "--step-pattern", PATTERN, "--",
                              "taskset", "-c", CPU, sys.executable, str(prog)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
        assert all(p.poll() is None for p in spin), "a spinner stopped: the contention was not there"
    finally:
        for p in spin:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert rec.returncode == 0, rec.stderr[-3000:]
    inc = next((tmp_path / "incidents").glob("cpuonly*"))
    d = diagnose_dir(inc)
    steps = d["steps"]
    assert len(steps) >= STEPS - 2
    assert all(s["kernel_sum_ns"] is None for s in steps)  # no GPU observed
    att = [s for s in steps if any(f["check"] == "cpu_contention" and f["verdict"] == "attributed" for f in s["findings"])]
    # Two spinners on the program's one CPU: about two thirds of every step runnable, not running.
    assert len(att) >= 0.7 * len(steps), [f for f in steps[5]["findings"] if f["check"] == "cpu_contention"]
    wait = sum(f["explains_ns"] for s in steps for f in s["findings"] if f["check"] == "cpu_contention")
    assert wait >= 0.3 * sum(s["wall_ns"] for s in steps)
    ev = next(f for f in att[-1]["findings"] if f["check"] == "cpu_contention")["evidence"]
    assert ev["basis"].startswith("host-only") and ev["runqueue_wait_ns"] > 0
    ne = d["next_experiments"]
    assert ne and ne[0]["check"] == "cpu_contention"
    advice = " ".join(e["candidate_change"] for e in ne).lower()
    assert "gpu" not in advice and "cuda" not in advice
