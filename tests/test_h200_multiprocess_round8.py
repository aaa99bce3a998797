"""The H200 producer/consumer job run end to end with the default job metric chosen by the plan
from the job's own recording (tests/fixtures/h200/round8_20261204/multiprocess_default, README
there): issue 35's "H200 multi-process fixture with the new default: its A/A floor".

Unlike tests/test_h200_multiprocess_default.py (last round's runs compared again offline), the
plan here was made on the H200 by today's plan stage, and the call kept its recording, so the
shape is read again from that recording and must agree with what the plan recorded."""

from __future__ import annotations

import json
from pathlib import Path

from workflow_lib.compare import build as compare
from workflow_lib.core import typed
from workflow_lib.core.incident import read_incident
from workflow_lib.plan import job_shape
from workflow_lib.plan.types import Plan
from workflow_lib.trials.types import Execution

D = Path(__file__).resolve().parent / "fixtures" / "h200" / "round8_20261204" / "multiprocess_default"
PRODUCERS = "job=throughput,role=producer"


def _records(name: str) -> tuple[Plan, dict[str, Execution]]:
    return (typed.read(D / name / "plan.json", Plan),
            {p.stem: typed.read(p, Execution) for p in sorted((D / name / "execution").glob("*.json"))})


def _compared(name: str) -> dict:
    """The comparison made again from the stored plan and executions by today's compare stage."""
    plan, ex = _records(name)
    return compare.compare(plan, ex, {b: e.digest() for b, e in ex.items()}, plan.digest()).to_json()


def test_the_plan_chose_the_producers_throughput_from_the_recording():
    plan, _ = _records("ab")
    m = plan.design.metric
    assert (m.job, m.role, m.source) == ("throughput", "producer", "auto"), m
    shape = m.shape
    assert (shape.kind, shape.chosen_by, shape.bound_role) == ("pipeline", "recording", "producer")
    assert shape.wait_share["consumer"] >= 0.5 and shape.wait_share["producer"] <= 0.1, shape
    # The same shape from the call's own recording, read again here.
    inc = read_incident(D / "fixture" / "incident")
    roles = {int(r): v for r, v in inc.manifest["job"]["roles"].items()}
    again = job_shape.classify(inc, roles, int(m.skip_steps or 0))
    assert (again["bound_role"], again["wait_share"]) == (shape.bound_role, shape.wait_share), again


def test_the_fix_is_faster_by_what_three_producers_make_with_a_floor_under_five_percent():
    c = _compared("ab")
    assert c["metric_choice"]["selector"] == PRODUCERS
    assert c["verdict"] == "faster", c["reasons"]
    assert c["noise_floor"]["pct"] < 5.0, c["noise_floor"]
    assert c["estimate"]["ratio_low"] < 1 / 3 < c["estimate"]["ratio_high"], c["estimate"]
    assert not any("keep up" in w for w in c.get("warnings") or []), c.get("warnings")
    # The consumers' own throughput, in the same runs, could not have told.
    consumers = next(j for j in c["job_metrics"] if j["selector"] == "job=throughput,role=consumer")
    assert consumers["floor_pct"] > 10 * c["noise_floor"]["pct"], consumers


def test_the_aa_is_neither_faster_nor_slower_with_a_floor_under_five_percent():
    c = _compared("aa")
    assert c["verdict"] not in ("faster", "slower"), c["reasons"]
    assert c["noise_floor"]["pct"] < 5.0, c["noise_floor"]
    assert c["estimate"]["ratio_low"] < 1 < c["estimate"]["ratio_high"], c["estimate"]


def test_today_compares_the_stored_runs_as_the_h200_did():
    for name in ("ab", "aa"):
        stored = json.loads((D / name / "comparison.json").read_text())
        c = _compared(name)
        assert (c["verdict"], round(c["noise_floor"]["pct"], 6)) == (stored["verdict"], round(stored["noise_floor"]["pct"], 6))
