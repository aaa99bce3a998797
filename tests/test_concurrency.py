"""Concurrency: two writers on one results tree never corrupt it.

- Two `stallcase ingest` of the same incident at once both succeed (store objects are
  linked, never overwritten; the record is replaced atomically) and verify finds nothing.
- Two Snakemake runs on one working directory: the second is refused by Snakemake's lock
  while the first runs, the first completes, and the store stays consistent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workflow_lib.core import records
from workflow_lib.snapshot.verify import verify

from incident_factory import make_incident

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_two_ingests_of_the_same_incident_at_once(tmp_path):
    inc = make_incident(tmp_path)
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "workflow_lib.cli", "ingest", str(inc), "--results-dir", str(results), "--allow-root", str(tmp_path)]
    for _ in range(3):  # a few rounds: the interleaving differs each time
        procs = [subprocess.Popen(argv, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        rec = records.read_record(results / "inc1" / "snapshot.json", "snapshot")
        report = verify(results)
        assert report.ok and report.leftovers == [], report.corrupt
        assert report.records == 1 and report.objects == 4  # manifest, steps, source, input
    assert rec["tables"]["steps"]["rows"] == 2


def _snakemake() -> list[str] | None:
    exe = Path(sys.executable).parent / "snakemake"
    return [str(exe)] if exe.exists() else ([shutil.which("snakemake")] if shutil.which("snakemake") else None)


@pytest.mark.slow
@pytest.mark.skipif(_snakemake() is None, reason="snakemake is not installed next to this interpreter or on PATH")
def test_second_snakemake_run_is_refused_by_the_lock_and_the_store_stays_consistent(tmp_path):
    make_incident(tmp_path, delay_ms=150.0)  # each trial run ~1 s: the first run holds the lock for seconds
    (tmp_path / "config").mkdir()
    config = {
        "incident": "inc1", "incidents_dir": "incidents", "results_dir": "results", "experiment": None,
        "candidate": "baseline",
        "trials": {"blocks": 1, "runs_per_arm": 2, "control_runs": 1, "warmup_runs": 1, "seed": 1, "max_retries": 0,
                   "max_failed_fraction": 0.34, "confidence": 0.95, "run_timeout_s": 60,
                   "metric": {"name": "step", "source": "recorder_steps", "statistic": "median", "skip_steps": 0, "unit": "ns"}},
    }
    (tmp_path / "config" / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    from workflow_lib.core import layout

    target = layout.execution("results", "inc1", layout.run_key("baseline", config["trials"], None), "b000")
    argv = _snakemake() + ["-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "1", target]
    first = subprocess.Popen(argv, env=ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    locks = tmp_path / ".snakemake" / "locks"
    deadline = time.monotonic() + 120
    while not (locks.is_dir() and any(locks.iterdir())):
        assert first.poll() is None, first.stdout.read()
        assert time.monotonic() < deadline, "first run never took its lock"
        time.sleep(0.05)
    second = subprocess.run(argv, env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    still_running = first.poll() is None
    out1 = first.communicate(timeout=300)[0]
    assert first.returncode == 0, out1[-3000:]
    assert still_running, "the first run ended before the second started: the lock was not exercised"
    assert second.returncode != 0
    assert "LockException" in second.stdout + second.stderr or "cannot be locked" in second.stdout + second.stderr
    assert "Traceback" not in second.stderr
    report = verify(tmp_path / "results")
    assert report.ok and report.leftovers == [], report.corrupt
    assert records.read_record(tmp_path / target, "execution")["status"] == "complete"
    # Once the first run is done the lock is gone: the same command runs (nothing left to do).
    again = subprocess.run(argv, env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
