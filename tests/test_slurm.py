"""The demo pipeline through a real SLURM (profiles/slurm) and on one machine (profiles/local).

One incident is captured once; every run below ingests that same incident into its own
results directory, so their plans must be byte-identical: the plan is a function of the
snapshot and the configuration, never of the executor. The SLURM test needs a running
controller (`.ci/slurm/start.sh`); without one it is skipped with the reason, unless
STALLCASE_REQUIRE_SLURM=1 (set by .ci/run) turns the skip into a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.core import records

REPO = Path(__file__).resolve().parent.parent
SNAKEFILE = REPO / "Snakefile"
CONFIG = REPO / "config" / "config.yaml"
BLOCKS = ("b000", "b001")
# Two blocks of three runs (A, B, A' in a seeded order): small enough for a 2-core CI machine.
RUNS_PER_BLOCK = 3
SMALL = """\
trials: {blocks: 2, runs_per_arm: 1, control_runs: 1, warmup_runs: 0, run_timeout_s: 120}
demo: {args: ["--steps", "20", "--min-ready", "4", "--sync-every", "1"]}
"""
RUN_TIMEOUT_S = 300
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: ([^)]+)\)")


def _slurm_missing() -> str | None:
    """Why SLURM cannot be used here, or None when a controller answers."""
    if shutil.which("sinfo") is None or shutil.which("scontrol") is None:
        return "sinfo/scontrol not on PATH (start a cluster with .ci/slurm/start.sh)"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "scontrol ping timed out: the controller is not up"
    if "UP" not in ping.stdout:
        return f"the SLURM controller is not up: {(ping.stdout + ping.stderr).strip() or 'no answer'}"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')"
    return None


@pytest.fixture(scope="module")
def slurm():
    reason = _slurm_missing()
    if reason:
        if os.environ.get("STALLCASE_REQUIRE_SLURM") == "1":
            pytest.fail(f"STALLCASE_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)


def _snakemake(workdir: Path, profile: str | None, target: str, results_dir: str) -> str:
    """Run the real workflow in `workdir`; returns its combined output, fails with its tail."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--directory", str(workdir),
           "--configfile", str(CONFIG), str(workdir / "small.yaml")]
    cmd += ["--profile", str(REPO / "profiles" / profile)] if profile else ["--cores", "2"]
    cmd += [target, "--config", "incident=demo", f"results_dir={results_dir}"]
    # The rebuilt workload imports workflow_lib; without an installed package it needs the
    # repository on PYTHONPATH (allow-listed, so the plan records it and the runs get it).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        _cancel_run(out)
        pytest.fail(f"snakemake ({profile or 'plain'}) ran over {RUN_TIMEOUT_S} s:\n{out[-4000:]}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"snakemake ({profile or 'plain'}) exit {proc.returncode}:\n{out[-6000:]}"
    return out


def _cancel_run(output: str) -> None:
    """Cancel the jobs of a SLURM run we gave up on (they are named by its run id)."""
    m = re.search(r"SLURM run ID: (\S+)", output)
    if m and shutil.which("scancel"):
        subprocess.run(["scancel", f"--name={m.group(1)}"], capture_output=True, timeout=20, check=False)


def _scontrol_job(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                         timeout=20, check=False).stdout
    assert out.strip(), f"scontrol does not know job {job_id} (MinJobAge too short?)"
    return dict(re.findall(r"(\w[\w/:]*)=(\S*)", out))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A work directory holding the demo incident, captured once for every run below."""
    wd = tmp_path_factory.mktemp("pipeline")
    (wd / "small.yaml").write_text(SMALL, encoding="utf-8")
    _snakemake(wd, "local", "incidents/demo/manifest.json", "results-capture")
    assert (wd / "incidents" / "demo" / "manifest.json").is_file()
    return wd


def _plan_digest(results: Path) -> str:
    return records.digest_of(records.read_record(results / "demo" / "plan.json", "plan"))


def _comparison(results: Path) -> dict:
    comparison = records.read_record(results / "demo" / "comparison.json", "comparison")  # validates
    assert comparison["plan_digest"] == _plan_digest(results)
    for block in BLOCKS:
        execution = records.read_record(results / "demo" / "execution" / f"{block}.json", "execution")
        assert execution["plan_digest"] == comparison["plan_digest"]
        assert [r["status"] for r in execution["runs"]].count("ok") == RUNS_PER_BLOCK, execution["runs"]
    return comparison


def _block_intervals(results: Path) -> list[tuple[int, int, str]]:
    out = []
    for block in BLOCKS:
        pre = records.read_record(results / "demo" / "preflight" / f"{block}.json", "preflight")
        ex = records.read_record(results / "demo" / "execution" / f"{block}.json", "execution")
        assert pre["checked_unix_ns"] <= ex["started_unix_ns"]
        out.append((pre["checked_unix_ns"], ex["ended_unix_ns"], block))
    return sorted(out)


@pytest.fixture(scope="module")
def slurm_run(slurm, workdir):
    # The latest record is the run's end (its comparison and report); results/demo/ then links
    # to that run's records (workflow_lib/core/layout.py), which is where the checks below read.
    output = _snakemake(workdir, "slurm", "results-slurm/demo/latest.json", "results-slurm")
    return workdir / "results-slurm", output


@pytest.mark.slurm
@pytest.mark.slow
def test_blocks_go_through_sbatch_one_job_and_one_gpu_each(slurm_run):
    results, output = slurm_run
    submitted = SUBMITTED.findall(output)
    # The incident already exists, so the block jobs are the only SLURM jobs of this run.
    assert len(submitted) == len(BLOCKS), output[-4000:]
    seen_blocks, jobs = set(), []
    for job_id, log_path in submitted:
        job = _scontrol_job(job_id)
        jobs.append(job)
        assert job["JobState"] == "COMPLETED", job
        assert "gpu:1" in job.get("TresPerJob", ""), job  # one GPU for preflight + trials together
        assert job["StdOut"] == log_path
        log = Path(log_path).read_text(encoding="utf-8")
        blocks = set(re.findall(r"block=(b\d{3})", log))
        assert len(blocks) == 1, f"job {job_id} ran {blocks or 'no block'}"
        block = blocks.pop()
        # preflight, then the trials, in this one job: the checked node is the node that ran.
        assert "rule preflight:" in log and "rule trials:" in log, log[-3000:]
        assert log.index("rule preflight:") < log.index("rule trials:")
        pre = records.read_record(results / "demo" / "preflight" / f"{block}.json", "preflight")
        ex = records.read_record(results / "demo" / "execution" / f"{block}.json", "execution")
        assert pre["status"] == "pass", pre
        assert pre["node"].split(".")[0] == ex["node"].split(".")[0] == job["BatchHost"].split(".")[0], (pre["node"], job)
        seen_blocks.add(block)
    assert seen_blocks == set(BLOCKS)
    # The fan-out: with a GPU each (the CI node has two), the block jobs ran at the same time.
    spans = [(job["StartTime"], job["EndTime"]) for job in jobs]  # ISO times sort as strings
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"SLURM ran the blocks one after another: {spans}"
    # The light rules ran here, not as SLURM jobs.
    for rule in ("snapshot", "plan", "compare"):
        assert f"localrule {rule}:" in output
    _comparison(results)


@pytest.mark.slow
def test_plain_run_keeps_blocks_serial_on_one_machine(demo_pipeline):
    """The README's run (the session's shared demo run, `--cores 2 --profile profiles/local`):
    no block's preflight or runs overlap another's."""
    out = []
    for ex_path in sorted((demo_pipeline.demo / "execution").glob("b*.json")):
        block = ex_path.stem
        pre = records.read_record(demo_pipeline.demo / "preflight" / f"{block}.json", "preflight")
        ex = records.read_record(ex_path, "execution")
        assert pre["checked_unix_ns"] <= ex["started_unix_ns"]
        out.append((pre["checked_unix_ns"], ex["ended_unix_ns"], block))
    intervals = sorted(out)
    assert len(intervals) == 6
    for (_, end, a), (start, _, b) in zip(intervals, intervals[1:]):
        assert end <= start, f"blocks {a} and {b} overlapped on one machine"
    records.read_record(demo_pipeline.demo / "comparison.json", "comparison")


@pytest.mark.slurm
@pytest.mark.slow
def test_local_profile_gives_same_plan_and_comparison_schema(slurm_run, workdir):
    _snakemake(workdir, "local", "results-local/demo/latest.json", "results-local")
    intervals = _block_intervals(workdir / "results-local")
    for (_, end, a), (start, _, b) in zip(intervals, intervals[1:]):
        assert end <= start, f"blocks {a} and {b} overlapped on one machine"
    local, on_slurm = _comparison(workdir / "results-local"), _comparison(slurm_run[0])
    assert local["plan_digest"] == on_slurm["plan_digest"]
    assert (workdir / "results-local/demo/plan.json").read_bytes() == (slurm_run[0] / "demo/plan.json").read_bytes()
    assert set(local) == set(on_slurm) and local["schema_version"] == on_slurm["schema_version"]
    local_nodes = {records.read_record(workdir / f"results-local/demo/execution/{b}.json", "execution")["node"] for b in BLOCKS}
    assert local_nodes == {socket.gethostname()}
