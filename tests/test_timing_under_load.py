"""The suite's timing-sensitive tests pass on a busy machine (issue 38): they run here beside two
processes that spin on the CPU (as many as this machine's 2 cores; CI may share its machine).

The three that failed on a busy machine assert what the code guarantees, not a share of an idle
machine's time. The two quick ones run here in every suite run; the producer/consumer pipeline
(minutes) joins them with STALLCASE_LOAD_ALL=1 (`.venv/bin/python -m pytest tests/test_timing_under_load.py`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
QUICK = ["tests/test_capture_step_marks.py", "tests/test_diagnose_demo_cpu.py"]
SLOW = ["tests/test_multiprocess_e2e.py::test_the_comparison_says_which_role_moved"]
HOGS = 2


def test_timing_sensitive_tests_pass_beside_two_cpu_hogs(tmp_path):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(HOGS)]
    try:
        tests = QUICK + (SLOW if os.environ.get("STALLCASE_LOAD_ALL") == "1" else [])
        proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider",
                               "--basetemp", str(tmp_path / "t"), *tests], cwd=ROOT, capture_output=True, text=True,
                              timeout=1800, check=False)
        assert all(h.poll() is None for h in hogs), "a hog stopped: the load was not there"
    finally:
        for h in hogs:
            os.killpg(h.pid, signal.SIGKILL)
            h.wait()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
