"""`stallcase record -- CMD`: a real child process, real signals, real output lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workflow_lib.capture.sidecar import compile_step_pattern, parse_triggers
from workflow_lib.core.errors import StallcaseError
from workflow_lib.core.incident import read_incident

ROOT = Path(__file__).resolve().parent.parent
PATTERN = r"step (?P<step>\d+) took (?P<ms>[\d.]+) ms"

CHILD = r"""
import sys, time
for i in range(int(sys.argv[1])):
    ms = float(sys.argv[2]) if i != int(sys.argv[3]) else float(sys.argv[4])
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass
    print(f"step {i} took {ms:.1f} ms", flush=True)
print("ready", flush=True)
sys.stdin.readline() if len(sys.argv) > 5 else None
time.sleep(float(sys.argv[5]) if len(sys.argv) > 5 else 0)
sys.exit(3)
"""


def _sidecar(tmp_path, *child_args, extra=()):
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    cmd = [sys.executable, "-m", "workflow_lib.cli", "record", "--incident", "job", "--incidents-dir",
           str(tmp_path / "inc"), "--step-pattern", PATTERN, *extra, "--", sys.executable, str(child), *child_args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE, cwd=tmp_path, env=env)


def test_exit_snapshot_steps_from_pattern_and_latency_trigger(tmp_path):
    p = _sidecar(tmp_path, "30", "5", "20", "60", extra=["--trigger", "exit", "--trigger", "latency:k=3,warmup=5,cooldown=50"])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == "step 0 took 5.0 ms" and "ready" in lines  # output forwarded unchanged
    final = read_incident(tmp_path / "inc" / "job")
    m = final.manifest
    assert m["reason"] == "exit" and m["producer"] == "sidecar"
    assert m["workload"]["argv"][1].endswith("child.py") and m["workload"]["argv"][2:] == ["30", "5", "20", "60"]
    steps = final.table("steps").to_pandas()
    assert list(steps["step_id"]) == list(range(30))
    dur_ms = (steps["end_ns"] - steps["start_ns"]) / 1e6
    assert dur_ms[20] == pytest.approx(60.0) and dur_ms[0] == pytest.approx(5.0)
    assert final.observed("sched")
    assert m["sources"]["nvml"]["status"] == "not_observed"
    assert any(a["role"] == "binary" for a in m["artifacts"])
    assert any(a["role"] == "library" for a in m["artifacts"])
    auto = read_incident(tmp_path / "inc" / "job.latency_change-1")
    assert auto.manifest["trigger"]["last_fire"]["step_id"] == 20
    assert "wrote" in err.decode()


def test_sigusr1_snapshot_while_running(tmp_path):
    p = _sidecar(tmp_path, "3", "1", "-1", "1", "0.2", extra=["--trigger", "sigusr1", "--trigger", "exit"])
    deadline = time.time() + 30
    seen = b""
    while b"ready" not in seen and time.time() < deadline:
        seen += p.stdout.readline()
    time.sleep(0.3)  # let the sidecar's sampler see the child's threads
    p.send_signal(signal.SIGUSR1)
    time.sleep(1.0)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err.decode()
    snap = read_incident(tmp_path / "inc" / "job.sigusr1-1")
    assert snap.manifest["reason"] == "sigusr1"
    sched = snap.table("sched").to_pandas()
    assert len(sched) > 0 and set(sched["thread_id"]) >= {snap.manifest["provenance"]["pid"]}
    assert (tmp_path / "inc" / "job" / "manifest.json").exists()


def test_missing_program_is_one_line_error(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "workflow_lib.cli", "record", "--incident", "x", "--incidents-dir",
                        str(tmp_path), "--", str(tmp_path / "nope")], capture_output=True, env=env, timeout=60)
    assert r.returncode == 2
    assert r.stderr.decode().strip().startswith("error: ") and "cannot run" in r.stderr.decode()
    assert len(r.stderr.decode().strip().splitlines()) == 1


def test_pattern_and_trigger_validation():
    with pytest.raises(StallcaseError, match="named duration group"):
        compile_step_pattern(r"step (\d+)")
    with pytest.raises(StallcaseError, match="regular expression"):
        compile_step_pattern(r"step (")
    kinds, trig = parse_triggers(["latency:k=4,warmup=3", "exit"])
    assert kinds == {"latency", "exit"} and trig.k == 4 and trig.warmup_steps == 3
    with pytest.raises(StallcaseError, match="unknown trigger"):
        parse_triggers(["onfire"])
    with pytest.raises(StallcaseError, match="not a number"):
        parse_triggers(["latency:k=x"])
