"""A torchrun job (torch on CPU, gloo, 2 ranks, an all-reduce each step) through the README's
pipeline as one job.

The user's own program (tests/ddp_job.py) is recorded under `torchrun --standalone
--nproc_per_node 2`; one rank does 40 ms of extra augmentation per step. Two ranks, one per
core of the CI machine: with three on two cores the fixed job's 1 ms steps measured the
scheduler's time slices (2-24 ms), and one CI run's A/A floor swallowed a 60% speed-up. The incident must
hold the three ranks of one run and the launcher's command as the workload; the diagnosis
must name the slow rank and its cause and credit the others with collective wait; the plan
must rebuild the job under torchrun with the slowest rank's step as the metric; the trials
on the fix (no extra augmentation) must say `faster`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch (CPU) is not installed: pip install torch==2.13.0")

from workflow_lib.core import records  # noqa: E402
from workflow_lib.core.incident import read_incident  # noqa: E402

from ddp_job import MODULES, make_project  # noqa: E402
from e2e_design import check_floor_target, trials_yaml  # noqa: E402
from quiet_machine import quiet_machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = Path(sys.executable).parent / "torchrun"
# The job's fastest step (min over the 37 counted step indices of the slowest rank's time), not
# its median. The slow rank's step is a 40 ms sleep and ~3 ms of work, and ~40% of steps wait
# 5-10 ms more for a CPU even on a quiet machine (two ranks and the launcher on two cores), so a
# run's median sits between those two modes and moves with the share of delayed steps: 36 runs
# of the baseline side by side at a load of 0-1.4 other CPUs gave a per-run spread of 5.2% for the
# median of 17 steps (the former design), 4.7% for 37, 1.5% for the min of 37 (3.4% for the min
# of 17); a ±5% floor in 19 designs of 20 at 6 blocks needs about 1.3% (docs/statistics.md §4,
# docs/trials.md). The fastest step is the job's own speed with the least of the machine's in it,
# as the word-LM per-token design reads it. 40 steps a run (tests/ddp_job.py): ~0.9 s more wall
# per baseline run, CPU within noise.
# 7 blocks, not 6: at 95% six blocks' floor is their largest |A'/A| (docs/statistics.md §4), and
# one run that other work slowed throughout still moves even the fastest step ~5% (±4.85% at
# 18:46, its block 0); seven drop the most extreme Walsh averages: drawn from the same 36 runs,
# the fastest of 37 gave a 6-block floor of ±2.6% median, ±8.4% at the 90th percentile, and a
# 7-block one of ±1.7% and ±4.5%. Three runs more (~20 s CPU).
TRIALS = trials_yaml("name: step_time, source: auto, per: step, statistic: min, skip_steps: 3, unit: ns", record_runs=False,
                     blocks=7)


def _sh(argv, cwd, env, timeout=900):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{(proc.stdout + proc.stderr)[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not TORCHRUN.exists():
        pytest.fail(f"{TORCHRUN} missing though torch is installed")
    root = tmp_path_factory.mktemp("torchrun")
    checkout = root / "stallcase"
    checkout.mkdir()
    for name in ("Snakefile", "rules", "profiles", "config", "schemas", "workflow_lib", "docs", "examples"):
        (checkout / name).symlink_to(ROOT / name)
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    repo = make_project(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALLCASE_", "TORCHELASTIC_", "SLURM_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    _sh([str(TORCHRUN), "--standalone", "--nproc_per_node", "2", "train.py"], repo, env)
    (checkout / "my.yaml").write_text(textwrap.dedent(f"""
        incidents_dir: {repo / 'incidents'}
        allow_roots: [{repo}]
        candidate:
          set_args: {{"--extra-ms": "0"}}
    """) + TRIALS)
    # The trials time the job's floor (issue 35: under ±5%): on a machine no other test loads
    # (tests/quiet_machine.py); at 5bccc52 and 78c2ec6 the other xdist worker beside them made it
    # ±5.0% and ±5.5%, busy in 21 of 21 runs.
    with quiet_machine("the torchrun job's trials"):
        _sh([".venv/bin/snakemake", "--cores", "2", "--profile", "profiles/local", "--configfile", "my.yaml",
             "--config", "incident=ddp-0412"], checkout, env)
    res = (checkout / "results" / "ddp-0412").resolve()
    kept = root / "kept"
    shutil.copytree(res, kept, ignore=shutil.ignore_patterns("work", "cas"))
    runs = [r for p in sorted((kept / "execution").glob("*.json")) for r in records.read_record(p, "execution")["runs"]]
    diag = records.read_record(checkout / "results" / "ddp-0412" / "diagnosis.json", "diagnosis")
    return {"repo": repo, "plan": records.read_record(kept / "plan.json", "plan"), "runs": runs, "diagnosis": diag,
            "comparison": records.read_record(kept / "comparison.json", "comparison")}


@pytest.mark.slow
def test_one_incident_of_one_run_with_the_launcher_as_workload(world):
    inc = read_incident(world["repo"] / "incidents" / "ddp-0412")
    assert inc.manifest["ranks"] == [0, 1]
    run = inc.manifest["job"]
    assert run["launcher"]["kind"] == "torchrun" and run["launcher"]["nproc_per_node"] == 2
    argv = inc.manifest["workload"]["argv"]
    assert any(Path(a).name == "torchrun" for a in argv) and argv[-1] == "train.py" and "--nproc_per_node" in argv


@pytest.mark.slow
def test_the_diagnosis_names_the_slow_rank_and_the_others_wait_in_the_collective(world):
    job = world["diagnosis"]["summary"]["job"]
    assert job["slowest_rank"] == 1, job
    cause = job["slowest_rank_cause"]
    assert cause["check"] == "host_work" and cause["spans"][0] == "augment", cause
    # Read against rank 0: about 40 ms a step more in augment (a sleep of 40 ms).
    assert 35e6 <= cause["span_ns_per_step_over_peers"]["augment"] <= 60e6, cause
    assert job["waited_for_slowest"] == [0]
    steps = job["common_steps"]  # about 40 ms per step, waited inside the all-reduce
    assert job["collective_wait_ns_by_rank"]["0"] >= 0.6 * steps * 40e6, job
    assert "on rank 1" in world["diagnosis"]["next_experiments"][0]["candidate_change"]


@pytest.mark.slow
def test_the_plan_rebuilds_the_job_under_torchrun_and_the_fix_is_faster(world):
    plan = world["plan"]
    for arm in ("baseline", "candidate"):
        assert any(Path(a).name == "torchrun" for a in plan["arms"][arm]["argv"])
    assert plan["arms"]["candidate"]["argv"][-2:] == ["--extra-ms", "0"]
    assert set(MODULES) <= {s["relpath"] for s in plan["arms"]["baseline"]["sources"]}
    m = plan["design"]["metric"]
    assert (m["job"], m["expect_ranks"], m["ranks"]) == ("slowest_rank", [0, 1], None)
    # Chosen from the job's shape: the ranks meet in all_reduce every step (plan/job_shape.py).
    assert (m["shape"]["kind"], m["shape"]["chosen_by"]) == ("collective", "recording"), m["shape"]
    failed = [(r["index"], r["arm"], r["error"]) for r in world["runs"] if r["status"] != "ok"]
    assert not failed, failed[:3]
    # The values are the slowest rank's step per index: their median never below any rank's own
    # median; the run's value is the fastest of them.
    for r in world["runs"]:
        assert [x["rank"] for x in r["ranks"]] == [0, 1]
        assert sorted(r["values_ns"])[len(r["values_ns"]) // 2] >= 0.95 * max(x["median_ns"] for x in r["ranks"])
        assert r["metric_ns"] == min(r["values_ns"])
    c = world["comparison"]
    assert c["verdict"] == "faster", c["reasons"]
    assert c["estimate"]["ratio"] < 0.6, c["estimate"]


# Issue 35's target. By the median of 17 steps the floor widened on a loaded machine (±5.5% at load
# 3-4, ±14% at load 4-8; ±14.8% and ±16.6% at load 1.4-2.9, 2026-12-04 18:08 and 18:30); by the
# fastest of 37 (TRIALS above) ±2.03%, ±2.10% and ±1.28% in three runs at load 2.0-3.7 with every
# run noted busy (2026-12-04 18:22-18:35, docs/trials.md).
@pytest.mark.slow
def test_the_jobs_floor_is_under_five_percent(world):
    check_floor_target(world["comparison"])  # strict unless the comparison names a busy machine
