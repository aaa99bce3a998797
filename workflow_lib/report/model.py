"""Records -> the report's view model: which numbers are shown, and from where. No drawing.

Every number the page prints is a value read from a record, carried with its source as
`(record, JSON pointer)` so a test (and a reader) can check it against the record. The
model never derives a measure the records do not hold; the few derived quantities it
shows (a step's ratio to the median step, a verdict sentence) say what they derive from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..compare.types import Comparison
from ..compare.verdict import VERDICT_HEADLINES
from ..core import records
from ..plan.types import Plan
from ..trials.types import Execution
from ..diagnose.stored import Diagnosis, as_diagnosis
from . import fmt, glance

SLOW_FACTOR = 1.25
"""A step is slow when its wall time exceeds this multiple of its rank's median step: below
that, run-to-run jitter of a healthy loop (a few percent on the H200s, more on a busy host)
is not worth a diagnosis. The slowest steps are listed even when none is slow."""
SLOW_STEPS_LISTED = 12
"""Steps detailed in the diagnosis section: the slowest first; the rest stay in the record."""

MEASURES = (
    ("wall_ns", "wall", "end - start of the step"),
    ("kernel_sum_ns", "kernel sum", "sum of kernel durations (overlaps counted each)"),
    ("busy_ns", "GPU busy", "union of kernels and copies over all streams"),
    ("host_api_ns", "host API", "union of host CUDA runtime/driver calls"),
)

@dataclass(frozen=True)
class Records:
    """The records a report is built from; absent stages are None (or empty)."""

    snapshot: dict
    """snapshot.json."""
    diagnosis: Diagnosis | dict | None
    """diagnosis.json with its tables (diagnose.load_diagnosis), or a record with its steps inline."""
    plan: Plan | None
    """plan.json."""
    preflights: dict
    """block -> preflight record."""
    executions: dict[str, Execution]
    """block -> execution record."""
    comparison: Comparison | None
    """comparison.json."""


def slow_steps(diagnosis: Diagnosis | dict) -> list[dict]:
    """The slowest steps (row of the steps table, ratio to the rank's median wall, slow flag),
    from the table's columns."""
    t = as_diagnosis(diagnosis).steps_table
    if t.num_rows == 0:
        return []
    wall = t["wall_ns"].to_numpy().astype(np.float64)
    rank = t["rank"].fill_null(-1).to_numpy()
    median = np.empty_like(wall)
    for r in np.unique(rank):  # ranks are few
        median[rank == r] = np.median(wall[rank == r])
    ratio = np.divide(wall, median, out=np.zeros_like(wall), where=median > 0)
    order = np.argsort(-wall, kind="stable")[:SLOW_STEPS_LISTED]
    return [{"index": int(i), "ratio_to_median": float(ratio[i]), "median_ns": float(median[i]),
             "slow": bool(ratio[i] > SLOW_FACTOR)} for i in order]


def _pct(log_ratio: float | None) -> float | None:
    return None if log_ratio is None else (math.exp(log_ratio) - 1.0) * 100.0


def verdict_words(comparison: Comparison) -> str:
    """The comparison's verdict as a sentence, built only from the record's own fields."""
    est, floor = comparison.estimate, comparison.noise_floor
    metric, conf = comparison.metric.name, comparison.design.confidence
    parts = [VERDICT_HEADLINES[comparison.verdict]]
    if est.change_pct is not None:
        lo, hi = _pct(est.log_low), _pct(est.log_high)
        interval = (f" ({conf:.0%} interval {fmt.pct(lo)} to {fmt.pct(hi)})" if lo is not None and hi is not None
                    else " (no interval: too few blocks)")
        parts.append(f"The candidate's {metric.replace('_', ' ')} changed by {fmt.pct(est.change_pct)}{interval} relative to the baseline.")
    if floor.pct is not None:
        parts.append(f"Running the baseline against itself (A′ vs A) moved it by up to ±{fmt.pct_abs(floor.pct)}: "
                     "a change must clear that band to count.")
    if comparison.aa_experiment:
        parts.append("This was a deliberate A/A experiment: the candidate is the baseline, so any verdict other "
                     "than no change measures the noise of this setup.")
    c = comparison.counts
    parts.append(f"{c.valid_blocks} of {c.planned_blocks} blocks were used.")
    return " ".join(parts)


def trial_runs(plan: Plan | None, executions: dict[str, Execution]) -> list[dict]:
    """Per block, in block order: every attempt in run order, failed ones included."""
    blocks = sorted(set(executions) | set(plan.schedule if plan else ()))
    out = []
    for b in blocks:
        ex = executions.get(b)
        if ex is None:
            out.append({"block": b, "status": "missing", "runs": []})
            continue
        runs = [{"pos": i, "index": r.index, "arm": r.arm, "attempt": r.attempt, "status": r.status,
                 "metric_ns": r.metric_ns, "src": f"execution/{b}:/runs/{i}/metric_ns"}
                for i, r in enumerate(ex.runs)]
        out.append({"block": b, "status": ex.status, "node": ex.node, "runs": runs})
    return out


def environment_rows(env: dict) -> tuple[list[tuple[str, object]], list[tuple[str, str]]]:
    """(observed fields, not-observed fields with reasons) of an environment fingerprint."""
    not_obs = env.get("_not_observed", {}) or {}
    seen = [(k, v) for k, v in sorted(env.items()) if not k.startswith("_")]
    return seen, sorted(not_obs.items())


def build(recs: Records, timeline: dict | None, *, perfetto_href: str | None = None) -> dict:
    """The view model: record sections plus the timeline tracks (drawing-only data)."""
    snap = recs.snapshot
    diag = as_diagnosis(recs.diagnosis) if recs.diagnosis is not None else None
    model = {
        "incident_id": snap["incident_id"],
        "snapshot": snap,
        "snapshot_digest": records.digest_of(snap),
        "diagnosis": diag.record if diag is not None else None,
        "diagnosis_tables": diag,
        "slow_steps": slow_steps(diag) if diag is not None else [],
        "plan": recs.plan,
        "plan_digest": recs.plan.digest() if recs.plan else None,
        "preflights": {b: recs.preflights[b] for b in sorted(recs.preflights)},
        "preflight_digests": {b: records.digest_of(p) for b, p in sorted(recs.preflights.items())},
        "executions": {b: recs.executions[b] for b in sorted(recs.executions)},
        "trials": trial_runs(recs.plan, recs.executions),
        "comparison": recs.comparison,
        "verdict_words": verdict_words(recs.comparison) if recs.comparison else None,
        "tried": fmt.changes(recs.plan.arms.candidate.changes) if recs.plan else None,
        "timeline": timeline,
        "perfetto_href": perfetto_href,
    }
    model["glance"] = glance.build(model)
    return model
