"""The H200 own-workload runs (examples/gpu/h200_own_workload.sh, 2026-12-01 08:58 and 11:13
UTC, two fresh machines): their records still read under today's schemas and give the same
verdict when compared again, and the plan's own A/A (A' vs A) is an interval around 1. Its CPU
twin, run in CI, is tests/test_own_workload_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_lib.compare import build as compare
from workflow_lib.core import records, typed
from workflow_lib.plan.types import Plan
from workflow_lib.trials.types import Execution

H200 = Path(__file__).resolve().parent / "fixtures" / "h200"


@pytest.mark.parametrize("D", [H200 / "own-workload", H200 / "own-workload-2"], ids=lambda d: d.name)
def test_h200_own_workload_records_reproduce_their_verdict(D):
    plan = typed.read(D / "plan.json", Plan)
    stored = records.read_record(D / "comparison.json", "comparison")
    ex = {p.stem: typed.read(p, Execution) for p in sorted((D / "execution").glob("*.json"))}
    again = compare.compare(plan, ex, {b: e.digest() for b, e in ex.items()}, plan.digest()).to_json()
    assert again["verdict"] == stored["verdict"] == "faster"
    assert abs(again["estimate"]["ratio"] - stored["estimate"]["ratio"]) < 1e-12
    runs = [r for e in ex.values() for r in e.runs]
    assert len(runs) == 18 and all(r.status == "ok" and r.metric_source == "recorder_steps" for r in runs)
    assert {s.relpath for s in plan.arms.baseline.sources} == {"model.py", "train.py"}
    assert plan.arms.candidate.argv[-2:] == ["--workers", "4"]
    control = again["noise_floor"]["control"]  # A' vs A: the same pinned baseline, interleaved
    assert control["ratio_low"] < 1 < control["ratio_high"]
