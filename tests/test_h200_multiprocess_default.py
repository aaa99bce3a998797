"""The H200 producer/consumer job again, with the job metric the plan picks from the job's shape
(tests/fixtures/h200/round7_20261204_eve/call2_multiprocess_default: 1 producer and 2 consumers
on one GPU, the README's pipeline with no `metric:` line, 3 producers as the candidate, then a
deliberate A/A; 6 blocks each).

What it shows, from the stored plans and executions compared again under today's code:
- the plan read the job as a pipeline (queue waits, no collectives) and chose the consumers'
  throughput, saying why;
- on this GPU that metric cannot conclude: a consumer that drains every queued item at once
  runs bursts of ~1 ms steps, then waits one or two producer steps (7.5 or 15 ms), so its rate
  swings from run to run; its A/A floor is hundreds of percent;
- the comparison says so and names the metric whose A/A floor is small in the same runs (the
  producers' throughput, measured from A and A' only), with the config line that selects it;
- judged by that metric the fix is faster by what three producers side by side make of one
  (each producer's step is the same ~7.5 ms: a ratio of 1/3), and the A/A is neither.
"""

from __future__ import annotations

from pathlib import Path

from workflow_lib.compare import build as compare
from workflow_lib.core import typed
from workflow_lib.plan.types import Plan
from workflow_lib.trials.types import Execution

D = Path(__file__).resolve().parent / "fixtures" / "h200" / "round7_20261204_eve" / "call2_multiprocess_default"
PRODUCERS = "job=throughput,role=producer"


def _again(name: str) -> dict:
    arm = D / name
    plan = typed.read(arm / "plan.json", Plan)
    ex = {p.stem: typed.read(p, Execution) for p in sorted((arm / "execution").glob("*.json"))}
    return compare.compare(plan, ex, {b: e.digest() for b, e in ex.items()}, plan.digest()).to_json()


def _job_metric(c: dict, selector: str) -> dict:
    return next(m for m in c["job_metrics"] if m["selector"] == selector)


def test_the_plan_reads_a_pipeline_and_chooses_the_consumers_throughput():
    c = _again("ab")
    choice = c["metric_choice"]
    assert choice["shape"] == "pipeline" and choice["selector"] == "job=throughput,role=consumer"
    assert "queue" in choice["reason"] and "collective" in choice["reason"]


def test_the_chosen_metric_cannot_conclude_and_the_comparison_names_one_that_can():
    for name in ("ab", "aa"):
        c = _again(name)
        assert c["verdict"] == "inconclusive"
        assert c["noise_floor"]["pct"] > 100, c["noise_floor"]
        prod = _job_metric(c, PRODUCERS)
        assert prod["floor_pct"] < 5, prod
        hint = [w for w in c["warnings"] if "too wide" in w]
        assert len(hint) == 1 and "trials: {metric: {job: throughput, role: producer}}" in hint[0], c["warnings"]


def test_by_the_producers_throughput_the_fix_is_three_producers_and_the_aa_is_no_change():
    prod = _job_metric(_again("ab"), PRODUCERS)
    assert prod["verdict"] == "faster"
    ratio_low, ratio_high = 1 + prod["low_pct"] / 100, 1 + prod["high_pct"] / 100
    assert ratio_low < 1 / 3 < ratio_high, prod
    aa = _job_metric(_again("aa"), PRODUCERS)
    assert aa["verdict"] not in ("faster", "slower"), aa
    assert aa["low_pct"] < 0 < aa["high_pct"], aa
