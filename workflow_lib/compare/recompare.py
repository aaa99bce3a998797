"""Comparing a design's committed records again under another job metric, without running anything.

A job's run records its value under the plan's metric (`metric_ns`) and under every other job
metric it could be judged by (`runs[].alternates`, keyed by the `trials.metric` that selects
it: plan/job_metric.alternates). Comparing again under one of those is the compare stage's own
computation (build.compare) on the same runs, each run's value read from its alternates, under
a plan whose metric says so: the executions are pointed at that plan, so nothing can be judged
under a label it was not measured with.

Runs that do not hold the selected metric (records made before runs carried alternates, or a
unit some rank did not declare) cannot be compared again: `NotRecorded` says, in one line,
which run lacks what, and what the run does hold.
"""

from __future__ import annotations

import dataclasses

from ..core import typed
from ..core.errors import RecordError
from ..plan.job_metric import selector
from ..core.typed import ABSENT
from ..plan.types import JobShape, Plan
from ..trials.types import Execution, Run
from .build import compare
from .types import Comparison


class NotRecorded(RecordError):
    """The executions do not hold the selected metric for every successful run."""


def _held(run: Run) -> str:
    """What a run without the alternate does hold, for the one line that says why not."""
    ranks = run.ranks or []  # null for a single process
    if ranks and all(r.total_ns is typed.ABSENT for r in ranks):
        return ("it holds each counted rank's median step and step count (ranks[]) and the plan's own per-step values "
                "(values_ns), not each rank's step times, which that metric is read from")
    return "it holds only the plan's own metric (metric_ns, values_ns)"


def with_job_metric(plan: Plan, executions: dict[str, Execution], job: str, role: str | None,
                    shape: dict | None = None) -> tuple[Plan, dict[str, Execution]]:
    """The plan with `trials.metric: {job, role}` and the executions' runs valued under it, pointed at that plan.
    `shape`: the job's shape (plan/job_metric.resolve's `shape`) when a reading of the recording chose
    this metric, as a plan built today would record it; without it the old shape goes, since it chose
    the old metric. Raises NotRecorded naming the first run that lacks the value."""
    key = selector(job, role)
    old = plan.design.metric
    ranks = None if old.ranks is ABSENT else old.ranks
    if role is not None:  # the role's ranks, as the original runs labelled them
        ranks = sorted({int(r.rank) for ex in executions.values() for run in ex.runs for r in run.ranks or []
                        if r.role == role} | set(ranks or []))
    metric = dataclasses.replace(old, job=job, role=role, ranks=ranks,
                                 shape=ABSENT if shape is None else JobShape.from_json(dict(shape)))
    new_plan = dataclasses.replace(plan, design=dataclasses.replace(plan.design, metric=metric))
    digest = new_plan.digest()
    out = {}
    for block, ex in sorted(executions.items()):
        runs = []
        for run in ex.runs:
            if run.status == "ok" and run.arm != "warmup":
                value = (run.alternates or {}).get(key)
                if value is None:
                    raise NotRecorded(f"execution/{block}.json",
                                      f"run {run.index} ({run.arm}) records no value under {key} "
                                      f"(runs[].alternates): {_held(run)}; run the trials again to compare by it")
                run = dataclasses.replace(run, metric_ns=float(value), values_ns=[float(value)])
            runs.append(run)
        out[block] = dataclasses.replace(ex, runs=runs, plan_digest=digest)
    return new_plan, out


def again(plan: Plan, executions: dict[str, Execution], job: str, role: str | None,
          shape: dict | None = None) -> Comparison:
    """The comparison of the same runs under `trials.metric: {job, role}` (build.compare)."""
    new_plan, new_ex = with_job_metric(plan, executions, job, role, shape)
    return compare(new_plan, new_ex, {b: e.digest() for b, e in new_ex.items()}, new_plan.digest())
