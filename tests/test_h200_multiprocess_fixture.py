"""The H200 producer/consumer job (examples/gpu/h200_multiprocess.sh, 2026-12-01 21:22 UTC, one
NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130): 1 producer and 2 consumers, each process
doing CUDA work on the one GPU, recorded with the README's loop, then the README's pipeline
with 3 producers as the candidate and `trials: {metric: {role: consumer}}`.

Its records still read under today's schemas and give the same verdicts when compared again
(A/B faster, the program's own expected ratio inside the interval; the deliberate A/A not
faster or slower), and the recorded incident diagnoses as a job: the consumers' queue wait is
linked to the producer's spans during it. The CPU twin, run in CI, is
tests/test_multiprocess_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflow_lib.compare import build as compare, recompare
from workflow_lib.core import records, typed
from workflow_lib.plan.types import Plan
from workflow_lib.trials.types import Execution
from workflow_lib.core.incident import read_incident
from workflow_lib.diagnose import diagnose_dir
from workflow_lib.plan import job_metric, job_shape

D = Path(__file__).resolve().parent / "fixtures" / "h200" / "multiprocess"


def _again(arm_dir: Path) -> tuple[dict, dict]:
    plan = typed.read(arm_dir / "plan.json", Plan)
    stored = records.read_record(arm_dir / "comparison.json", "comparison")
    ex = {p.stem: typed.read(p, Execution) for p in sorted((arm_dir / "execution").glob("*.json"))}
    again = compare.compare(plan, ex, {b: e.digest() for b, e in ex.items()}, plan.digest()).to_json()
    return stored, again


def test_the_ab_is_faster_by_about_what_the_program_itself_measured():
    stored, again = _again(D / "ab")
    assert again["verdict"] == stored["verdict"] == "faster"
    assert abs(again["estimate"]["ratio"] - stored["estimate"]["ratio"]) < 1e-12
    # The program's own printed consumer step medians (1 vs 3 producers), from the same run.
    expected = json.loads((D / "summary.json").read_text())["expected_ratio"]
    est = again["estimate"]
    assert est["ratio_low"] < expected < est["ratio_high"], (est, expected)
    runs = [r for p in (D / "ab" / "execution").glob("*.json") for r in records.read_record(p, "execution")["runs"]]
    assert len(runs) == 18 and all(r["status"] == "ok" for r in runs)


def test_the_deliberate_aa_is_neither_faster_nor_slower():
    stored, again = _again(D / "aa")
    assert again["verdict"] == stored["verdict"]
    assert again["verdict"] not in ("faster", "slower")


def test_the_recorded_job_links_the_consumers_wait_to_the_producer():
    job = diagnose_dir(D / "incident")["summary"]["job"]
    waits = {w["rank"]: w for w in job["queue_waits"]}
    assert set(waits) == {0, 1}
    for w in waits.values():
        assert w["role"] == "consumer" and w["wait_ns"] > 0
        assert {"forward", "pack"} <= set(w["overlapped_producer_spans"]["2"])


def _records(arm_dir: Path) -> tuple[Plan, dict[str, Execution]]:
    plan = typed.read(arm_dir / "plan.json", Plan)
    return plan, {p.stem: typed.read(p, Execution) for p in sorted((arm_dir / "execution").glob("*.json"))}


def _todays_default(plan: Plan) -> dict:
    """The metric today's plan stage would choose for this job: the user's `trials.metric` as
    my.yaml gave it (role: consumer, no job), the job's shape read from the committed incident."""
    inc = read_incident(D / "incident")
    roles = {int(r): v for r, v in inc.manifest["job"]["roles"].items()}
    asked = {k: v for k, v in plan.design.metric.to_json().items() if k not in ("job", "shape", "ranks", "expect_ranks")}
    return job_metric.resolve(asked, inc.manifest, job_shape.classify(inc, roles))


def test_recompared_with_todays_default_the_runs_say_in_one_line_what_they_lack():
    """The job-shape default (the consumers' throughput, read over 3-step windows of each
    consumer's step times) cannot be computed from these runs: they predate per-rank step
    times in the record. The compare stage's re-compare says so in one line, naming what the
    runs hold, instead of judging the old values under the new label."""
    plan, ex = _records(D / "aa")
    m = _todays_default(plan)
    assert (m["job"], m["shape"]["kind"]) == ("throughput", "pipeline"), m
    with pytest.raises(recompare.NotRecorded) as err:
        recompare.again(plan, ex, m["job"], m["role"])
    line = err.value.oneline()
    assert "\n" not in line and f"job=throughput,role={m['role']}" in line, line
    assert "ranks[]" in line and "step times" in line, line


def _with_consumer_throughput(ex: dict[str, Execution], role: str) -> dict[str, Execution]:
    """The runs with the role's throughput in the total form (`statistic: mean`, each rank's
    counted work over its counted time), each consumer's median x its steps standing in for its
    counted sum (the runs hold no sum; the exact value, and the default's 3-step windows, need
    a new H200 run). Per-rank medians alone, windows of one step, are exact here but give a
    floor of ±253%: one consumer drains the queue in bursts (docs/statistics.md §13)."""
    import dataclasses

    out = {}
    for block, e in ex.items():
        runs = []
        for r in e.runs:
            if r.status == "ok" and r.ranks:
                cons = [x for x in r.ranks if x.role == role]
                r = dataclasses.replace(r, alternates={job_metric.selector("throughput", role):
                                                       max(x.median_ns * x.steps for x in cons) / sum(x.steps for x in cons)})
            runs.append(r)
        out[block] = dataclasses.replace(e, runs=runs)
    return out


def test_recompared_by_the_consumers_throughput_the_aa_floor_halves_and_the_ab_stays_faster():
    """The nearest form of today's default these runs allow, compared again by the compare
    stage (recompare.again) beside the old default as stored. Measured 2026-12-04 from the
    committed records: A/A floor ±54.7% against ±106.6% for the slowest consumer per step, both
    inconclusive; the A/B faster by either (-89.4% and -88.7%); docs/trials.md."""
    floors = {}
    for arm in ("aa", "ab"):
        plan, ex = _records(D / arm)
        m = _todays_default(plan)
        old = compare.compare(plan, ex, {b: e.digest() for b, e in ex.items()}, plan.digest())
        new = recompare.again(plan, _with_consumer_throughput(ex, m["role"]), m["job"], m["role"])
        assert new.metric.label == "consumer throughput (time per step)", new.metric
        floors[arm] = (new.noise_floor.pct, old.noise_floor.pct, new.verdict, old.verdict)
    (new_aa, old_aa, new_v, old_v), ab = floors["aa"], floors["ab"]
    assert new_v not in ("faster", "slower") and old_v not in ("faster", "slower")
    assert new_aa < 0.6 * old_aa, floors
    assert ab[2] == "faster", floors
