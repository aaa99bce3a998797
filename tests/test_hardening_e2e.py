"""Issue 38 end to end, with real Snakemake runs of the built-in demo (small counts):

  - `--config 'trials={blocks: 6, runs_per_arm: 1}'`: Snakemake reads nested values as strings
    (YAML BaseLoader); they are typed by the config schema and accepted, and a value that does
    not convert is refused naming the key and the value (the Snakefile and `stallcase doctor` alike);
  - a byte flipped in a stored table: the stage that needs it fails with advice, and the advised
    plain rerun heals the store (the snapshot stage runs again) and finishes;
  - a candidate whose every run fails: the pipeline exits non-zero, its last line says why,
    and results/<incident>/ still shows the earlier run (latest moves only to a comparison);
    the same command again fails again with the same last line, without running the trials again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_SMALL, REPO

pytestmark = pytest.mark.slow


def _snakemake(wd: Path, *extra: str, configfiles=()) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(wd), "--cores", "2",
            "--profile", str(REPO / "profiles" / "local"), "--configfile", str(REPO / "config" / "config.yaml"),
            str(wd / "small.yaml"), *map(str, configfiles), "--config", "incident=demo", f"results_dir={wd / 'results'}",
            f"incidents_dir={wd / 'incidents'}", *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run(argv, cwd=wd, env=env, capture_output=True, text=True, timeout=900, check=False)


def _stallcase(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "workflow_lib.cli", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def run1(tmp_path_factory):
    wd = tmp_path_factory.mktemp("hardening-e2e")
    # Two blocks at confidence 0.5 (the fewest that can conclude there): these tests time nothing,
    # and each of their four pipeline runs pays for every block's runs.
    small = DEMO_SMALL.replace("  blocks: 6\n", "  blocks: 2\n").replace("  confidence: 0.95\n", "  confidence: 0.5\n")
    assert small != DEMO_SMALL
    (wd / "small.yaml").write_text(small, encoding="utf-8")
    proc = _snakemake(wd, "trials={blocks: 2, runs_per_arm: 1, confidence: 0.5}")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return wd


def _latest(wd: Path) -> dict:
    return json.loads((wd / "results" / "demo" / "latest.json").read_text())


def test_nested_config_overrides_are_typed_by_the_schema(run1):
    plan = json.loads((run1 / "results" / "demo" / "plan.json").read_text())
    assert plan["design"]["blocks"] == 2 and plan["design"]["runs_per_arm"] == 1 and plan["design"]["confidence"] == 0.5


def test_a_nested_override_that_does_not_convert_is_refused_naming_key_and_value(run1):
    proc = _snakemake(run1, "trials={blocks: x}", "-n")
    assert proc.returncode != 0
    err = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert err and "trials.blocks" in err[0] and "'x'" in err[0] and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    ok = _stallcase("doctor", "--config", "trials={blocks: 8}")
    assert ok.returncode == 0 and ok.stdout.startswith("ok: "), ok.stdout + ok.stderr
    bad = _stallcase("doctor", "--config", "trials={blocks: x}")
    assert bad.returncode == 2 and "trials.blocks" in bad.stderr and "'x'" in bad.stderr, bad.stderr


def test_a_flipped_byte_in_the_store_is_healed_by_the_advised_plain_rerun(run1):
    snap = json.loads((run1 / "results" / "demo" / "snapshot.json").read_text())
    digest = snap["tables"]["steps"]["digest"]
    obj = run1 / "results" / "cas" / "blake3" / digest[:2] / digest[2:]
    data = bytearray(obj.read_bytes())
    data[len(data) // 2] ^= 0xFF
    os.chmod(obj, 0o644)
    obj.write_bytes(bytes(data))
    failed = _snakemake(run1, "--forcerun", "diagnose")
    assert failed.returncode != 0
    end = [ln for ln in failed.stdout.splitlines() if ln.startswith("stallcase: ")]
    assert any("out of date and is removed: rerun" in ln for ln in end), failed.stdout[-3000:]
    assert any(ln.startswith("stallcase: fix: rerun the same command") for ln in end), end
    healed = _snakemake(run1)
    assert healed.returncode == 0, (healed.stdout + healed.stderr)[-4000:]
    assert obj.is_file() and _stallcase("verify", str(run1 / "results")).returncode == 0


def test_when_every_candidate_run_fails_the_pipeline_fails_and_latest_stays(run1):
    before = _latest(run1)
    broken = run1 / "broken.yaml"
    broken.write_text('candidate:\n  set_args: {"--producers": "not-a-number"}\n', encoding="utf-8")
    proc = _snakemake(run1, configfiles=[broken])
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-4000:]
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("stallcase: ")][-1]
    assert last.startswith("stallcase: failed: no comparison could be made") and "exit status" in last, last
    assert f"still shows run {before['run']}" in last, last
    assert _latest(run1) == before


# A failed run leaves its rule `made` without output, so the same command runs that job again
# (before: every output was present, Snakemake said "Nothing to be done", exit status 0).
def test_the_same_failed_command_again_fails_again(run1):
    before = _latest(run1)
    broken = run1 / "broken.yaml"
    broken.write_text('candidate:\n  set_args: {"--producers": "not-a-number"}\n', encoding="utf-8")
    first = _snakemake(run1, configfiles=[broken])
    assert first.returncode == 1, (first.stdout + first.stderr)[-4000:]
    first_last = [ln for ln in first.stdout.splitlines() if ln.startswith("stallcase: ")][-1]
    executions = sorted((run1 / "results" / "demo" / "runs").glob("ab-*/execution/*.json"))
    stamps = [p.stat().st_mtime_ns for p in executions]
    again = _snakemake(run1, configfiles=[broken])
    assert again.returncode == 1, (again.stdout + again.stderr)[-4000:]
    again_last = [ln for ln in again.stdout.splitlines() if ln.startswith("stallcase: ")][-1]
    assert again_last.startswith("stallcase: failed: no comparison could be made"), again_last
    assert again_last == first_last
    assert _latest(run1) == before
    assert executions and [p.stat().st_mtime_ns for p in executions] == stamps  # the trials were not run again
