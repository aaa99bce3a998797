"""A multi-process job through the README's pipeline, as one unit.

A producer/consumer program of the user's own (tests/producer_consumer.py: three modules in
its own git repository, processes and a multiprocessing queue, each process recording
itself the README's way) is recorded once, then the README's commands run with the fix
(three producers instead of one) as the candidate and no metric of the test's choosing: the
plan reads the job's shape from the recording (a queue between producer and consumers, no
collective; the consumers waiting on it most of their time, the producer never) and chooses
the producers' throughput, the rate that feeds the job, saying why. The verdict must be
`faster` by about the change in consumer step time the program itself prints, with no failed
run and an A/A floor under 5%; an A/A must be neither faster nor slower. The incident must hold every
rank with its role, and the comparison each role's throughput and time per step with floors.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from workflow_lib.core import records
from workflow_lib.core.incident import read_incident

from producer_consumer import MODULES, make_project
from e2e_design import check_floor_target, trials_yaml

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
# 7 blocks, not 6: at 95% six blocks' A/A interval is the range of their six values (docs/statistics.md §3),
# seven drop the two most extreme Walsh averages each side: the floor falls by a quarter for one block more.
TRIALS = trials_yaml("name: step_time, source: auto, per: step, statistic: median, skip_steps: 5, unit: ns", blocks=7)


def _sh(argv, cwd, env, timeout=1500):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{(proc.stdout + proc.stderr)[-5000:]}"
    return proc


def _keep(checkout: Path, incident: str, dest: Path) -> SimpleNamespace:
    src = (checkout / "results" / incident).resolve()
    shutil.copytree(src, dest, symlinks=False, ignore=shutil.ignore_patterns("work", "cas"))
    runs = [r for p in sorted((dest / "execution").glob("*.json")) for r in records.read_record(p, "execution")["runs"]]
    return SimpleNamespace(plan=records.read_record(dest / "plan.json", "plan"), runs=runs, dir=dest,
                           comparison=records.read_record(dest / "comparison.json", "comparison"))


def _consumer_ms(out: str) -> float:
    vals = [float(v) for v in re.findall(r"consumer \d+: median step ([\d.]+) ms", out)]
    assert len(vals) == 2, out
    return max(vals)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("multiprocess")
    checkout = root / "stallcase"
    checkout.mkdir()
    for name in ("Snakefile", "rules", "profiles", "config", "schemas", "workflow_lib", "docs", "examples"):
        (checkout / name).symlink_to(ROOT / name)
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    repo = make_project(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALLCASE_", "TORCHELASTIC_", "SLURM_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    off = dict(env, STALLCASE_RECORDER="off")
    # What the program itself says about one producer and three (its own clock).
    own = {p: _consumer_ms(_sh([PY, "pipeline.py", "--producers", p, "--steps", "40"], repo, off).stdout) for p in ("1", "3")}
    # 1. Record it: every process records itself (the README's loop).
    _sh([PY, "pipeline.py", "--producers", "1", "--steps", "50"], repo, env)
    (checkout / "my.yaml").write_text(textwrap.dedent(f"""
        incidents_dir: {repo / 'incidents'}
        allow_roots: [{repo}]
        candidate:
          set_args: {{"--producers": "3"}}
    """) + TRIALS)
    smk = [".venv/bin/snakemake", "--cores", "2", "--profile", "profiles/local", "--configfile", "my.yaml", "--config"]
    end = _sh([*smk, "incident=pc-0412"], checkout, env)
    ab = _keep(checkout, "pc-0412", root / "kept" / "ab")
    # The A/A only has to be neither faster nor slower: without per-run captures (half the cost).
    (checkout / "aa.yaml").write_text((checkout / "my.yaml").read_text() + "  record_runs: false\n")
    _sh([*smk[:6], "aa.yaml", "--config", "incident=pc-0412", "candidate=baseline"], checkout, env)
    aa = _keep(checkout, "pc-0412", root / "kept" / "aa")
    diagnosis = records.read_record(checkout / "results" / "pc-0412" / "diagnosis.json", "diagnosis")
    return SimpleNamespace(repo=repo, ab=ab, aa=aa, expected=own["3"] / own["1"], end=end.stdout + end.stderr,
                           diagnosis=diagnosis)


@pytest.mark.slow
def test_one_incident_holds_every_rank_with_its_role(world):
    inc = read_incident(world.repo / "incidents" / "pc-0412")
    assert inc.manifest["ranks"] == [0, 1, 2]
    assert inc.manifest["job"]["roles"] == {"0": "consumer", "1": "consumer", "2": "producer"}
    assert not (world.repo / "incidents" / "pc-0412.2").exists()
    spans = inc.table("spans").to_pandas()
    assert set(spans[spans["role"] == "producer"]["name"]) >= {"pack"}
    assert set(spans[spans["role"] == "consumer"]["name"]) >= {"queue_get", "forward"}


@pytest.mark.slow
def test_more_producers_make_the_consumers_faster_by_the_programs_own_change(world):
    c = world.ab.comparison
    assert c["verdict"] == "faster", c["reasons"]
    assert world.expected < 0.7, world.expected
    assert 0.6 * world.expected <= c["estimate"]["ratio"] <= world.expected / 0.6, (c["estimate"]["ratio"], world.expected)
    m = world.ab.plan["design"]["metric"]
    assert (m["job"], m["role"], m["ranks"], m["expect_ranks"]) == ("throughput", "producer", [2], [0, 1, 2])
    # The consumers kept up with three producers: the producers' rate is the job's.
    assert not any("keep up" in w for w in world.ab.comparison.get("warnings") or []), world.ab.comparison["warnings"]


@pytest.mark.slow
def test_the_plan_chose_the_producers_throughput_from_the_jobs_shape_and_says_why(world):
    shape = world.ab.plan["design"]["metric"]["shape"]
    assert (shape["kind"], shape["chosen_by"], shape["bound_role"]) == ("pipeline", "recording", "producer"), shape
    assert shape["wait_share"]["consumer"] >= 0.5 and shape["wait_share"]["producer"] <= 0.1, shape
    assert "queue" in shape["reason"] and "consumer" in shape["reason"] and "set the job's rate" in shape["reason"]
    assert world.ab.comparison["metric_choice"]["selector"] == "job=throughput,role=producer"


# Issue 35's target. On a loaded machine the floor widens (±7.6% and ±8.1% here at load 2-8: the
# producer woken late); on the quiet 2-core CI machine it passed (fresh-clone .ci/run, 2026-12-03).
# Judged as check_floor_target says: strict unless the comparison names a busy machine.
@pytest.mark.slow
def test_the_aa_floor_is_under_five_percent(world):
    for c in (world.ab.comparison, world.aa.comparison):
        check_floor_target(c)


@pytest.mark.slow
def test_each_roles_throughput_and_time_per_step_come_with_their_own_floors(world):
    rows = {r["selector"]: r for r in world.ab.comparison["job_metrics"]}
    for key in ("job=throughput,role=consumer", "job=slowest_rank,role=consumer",
                "job=throughput,role=producer", "job=slowest_rank,role=producer"):
        assert rows[key]["floor_pct"] is not None, rows[key]
    assert rows["job=throughput,role=producer"]["chosen"] and rows["job=throughput,role=producer"]["verdict"] == "faster"


@pytest.mark.slow
def test_no_failed_runs_every_module_pinned_and_each_run_names_its_consumers(world):
    failed = [(r["index"], r["arm"], r["error"]) for r in world.ab.runs if r["status"] != "ok"]
    assert not failed, failed[:3]
    assert set(MODULES) <= {s["relpath"] for s in world.ab.plan["arms"]["baseline"]["sources"]}
    assert all([(x["rank"], x["role"], x["counted"]) for x in r["ranks"]] == [(2, "producer", True), (0, "consumer", False),
                                                                               (1, "consumer", False)]
               for r in world.ab.runs if r["arm"] != "B")
    # The candidate's three producers all count (ranks 2-4: the recording held one).
    assert all(sorted(x["rank"] for x in r["ranks"] if x["counted"]) == [2, 3, 4] for r in world.ab.runs if r["arm"] == "B")


@pytest.mark.slow
def test_the_aa_is_neither_faster_nor_slower(world):
    assert world.aa.comparison["verdict"] not in ("faster", "slower"), world.aa.comparison["reasons"]


@pytest.mark.slow
def test_the_diagnosis_links_the_consumers_wait_to_the_producer_and_names_the_lever(world):
    job = world.diagnosis["summary"]["job"]
    waits = {w["rank"]: w for w in job["queue_waits"]}
    assert set(waits) == {0, 1}
    for w in waits.values():  # the consumers waited while the producer (rank 2) packed
        assert "pack" in w["overlapped_producer_spans"]["2"]
        assert w["overlapped_producer_spans"]["2"]["pack"] >= 0.5 * w["wait_ns"]
    top = world.diagnosis["next_experiments"][0]
    assert top["check"] == "input_starvation" and top["candidate_change"].startswith("more producers")


@pytest.mark.slow
def test_the_comparison_says_which_role_moved(world):
    rows = {r["name"]: r for r in world.ab.comparison["components"]}
    wait = rows["role:consumer:check:input_starvation"]
    assert wait["clears_floor"] and wait["delta_ns_per_step"] < 0, wait
    assert "role:producer:span:pack" in rows
    # The consumer's wait is one time seen two ways (the input_starvation check over its queue_get
    # span); which of the two clears its floor by more is the run's noise, so either names it.
    sentence = world.ab.comparison["sentence"]
    assert ("by role: consumer input wait \u2212" in sentence or "by role: consumer span queue_get \u2212" in sentence), sentence
