"""Small builders for plan and execution records used by the comparison tests."""

from __future__ import annotations

import numpy as np

from workflow_lib.core import records, typed
from workflow_lib.plan.schedule import make_schedule
from workflow_lib.plan.types import Design, Plan
from workflow_lib.trials.types import Execution

DIGEST0 = "0" * 64


def design(blocks: int = 8, runs_per_arm: int = 3, control_runs: int = 3, warmup_runs: int = 1,
           seed: int = 7, confidence: float = 0.95, max_failed_fraction: float = 0.25) -> dict:
    return {
        "blocks": blocks, "runs_per_arm": runs_per_arm, "control_runs": control_runs,
        "warmup_runs": warmup_runs, "seed": seed, "max_retries": 2, "max_failed_fraction": max_failed_fraction,
        "confidence": confidence,
        "metric": {"name": "step_time", "source": "recorder_steps", "statistic": "median", "unit": "ns"},
    }


def typed_design(fields: dict) -> Design:
    """A runner test's partial design (retries, timeout, metric) as the plan's Design: the
    fields the runner does not read are those of design()."""
    return Design.from_json({**design(), **fields})


def plan(des: dict | None = None, *, same_as_baseline: bool = False) -> dict:
    des = des or design()
    arm = {"argv": ["python", "train.py"], "env": {}, "changes": {}}
    candidate = dict(arm, changes={"args": ["--fast"]} if not same_as_baseline else {})
    if same_as_baseline:
        candidate["same_as_baseline"] = True
    rec = {
        "schema_version": 1, "kind": "plan", "incident_id": "inc-1", "experiment": None,
        "snapshot_digest": DIGEST0, "artifacts": [],
        "workload": {"argv": ["python", "train.py"], "cwd": "/w", "env": {}},
        "arms": {"baseline": arm, "candidate": candidate},
        "design": des, "schedule": make_schedule(des), "environment": {},
    }
    records.validate(rec, "plan")
    return rec


def run(index: int, arm: str, value_ns: float | None, *, status: str = "ok", attempt: int = 0,
        unusual: list[str] | None = None) -> dict:
    ok = status == "ok"
    return {
        "index": index, "arm": arm, "attempt": attempt, "status": status,
        "exit_code": 0 if ok else 1, "start_unix_ns": 1_000 + index, "end_unix_ns": 2_000 + index,
        "metric_ns": value_ns if ok else None, "values_ns": [value_ns] if ok and value_ns is not None else [],
        "gpu": {"status": "not_observed", "reason": "test"}, "unusual": unusual or [],
        "error": None if ok else "exit status 1",
    }


def execution(pl: dict, plan_digest: str, block: str, value_of, *, status: str = "complete",
              failed: frozenset[int] = frozenset()) -> dict:
    """`value_of(arm, index)` gives each run's ns; indices in `failed` fail every attempt."""
    runs = []
    for entry in pl["schedule"][block]:
        i, arm = entry["index"], entry["arm"]
        if i in failed:
            runs += [run(i, arm, None, status="failed", attempt=a) for a in range(3)]
        else:
            runs.append(run(i, arm, float(value_of(arm, i))))
    rec = {
        "schema_version": 1, "kind": "execution", "block": block, "plan_digest": plan_digest,
        "preflight_digest": DIGEST0, "node": "node-0", "status": status, "runs": runs,
    }
    records.validate(rec, "execution")
    return rec


def executions(pl: dict, value_of_block, **kw) -> tuple[dict[str, dict], dict[str, str], str]:
    """All blocks; `value_of_block(block_index, arm, index)`. Returns (executions, digests, plan_digest)."""
    pd = records.digest_of(pl)
    ex = {b: execution(pl, pd, b, lambda arm, i, k=k: value_of_block(k, arm, i), **kw) for k, b in enumerate(sorted(pl["schedule"]))}
    return ex, {b: records.digest_of(e) for b, e in ex.items()}, pd


def typed_records(pl: dict, ex: dict[str, dict]) -> tuple[Plan, dict[str, Execution]]:
    """The JSON records (version 1, as older stallcase wrote them) as the stages take them: validated
    and upgraded as a reader reads them from plan.json and execution/<block>.json."""
    return typed.of_json(Plan, pl, "plan.json"), {b: typed.of_json(Execution, e, f"execution/{b}.json") for b, e in ex.items()}


def lognormal_values(seed: int, effect: float = 0.0, noise: float = 0.01):
    """value_of_block with independent 1% log-normal noise and B multiplied by 1 + effect."""
    rng = np.random.default_rng(seed)
    cache: dict = {}

    def value(k: int, arm: str, i: int) -> float:
        if (k, i) not in cache:
            cache[(k, i)] = 2.0e6 * float(np.exp(noise * rng.standard_normal()))
        return cache[(k, i)] * ((1.0 + effect) if arm == "B" else 1.0)

    return value
