"""Typed record of the comparison stage (schemas/comparison.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
  2: components[], change_explained, predictions, sentence (required from 2 on; a version 1
     record cannot be upgraded: re-run the compare rule).
  2 (additive, same version): metric.per and metric.label, metric_choice, job_metrics, warnings, sequential (all optional:
     a record without them says nothing of them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 2


@typed.record("comparison", version=SCHEMA_VERSION)
class Comparison:
    """comparison.json: candidate vs baseline over the plan's blocks, and the verdict (compare/build.py)."""

    incident_id: str = doc("the incident the plan derives from")
    experiment: str | None = doc("the named experiment, null for none")
    plan_digest: str = doc("blake3 digest of the plan record compared")
    execution_digests: dict = doc("block id -> digest of its execution record")
    aa_experiment: bool = doc("the candidate is the baseline itself (deliberate A/A run)")
    metric: dict = doc("what a run's value is (the plan's resolved metric) and its unit")
    design: dict = doc("the plan's design, summarized")
    method: dict = doc("the estimator, interval and decision rule used (docs/statistics.md)")
    counts: dict = doc("blocks planned, used and excluded; runs per arm")
    estimate: dict = doc("candidate vs baseline (B/A) with its interval")
    noise_floor: dict = doc("the A/A (A vs A') difference the design cannot tell from noise")
    mde: dict = doc("minimal detectable effect of the design")
    verdict: str = doc("faster, slower, no_detectable_change or inconclusive (compare/verdict.py VERDICTS)")
    reasons: list = doc("why this verdict, most decisive first")
    blocks: list = doc("each block: used or excluded (with the reason), its ratio")
    components: list = doc("per component of the step time: candidate - baseline with its own A/A floor")
    change_explained: dict = doc("how much of the change the components explain")
    predictions: list = doc("the baseline runs' next_experiments bound beside the realized change of that cause")
    sentence: str = doc("the verdict with the components that explain it")
    failure_summary: str = doc("when runs failed: how many blocks had a failed run and the most common reason (exit, rank, exception)", optional=True)
    metric_choice: dict = doc("a job: its shape, which chose the default metric, and why (MetricChoice)", optional=True)
    job_metrics: list = doc("a job: each recorded job metric with its own estimate and A/A floor", optional=True)
    warnings: list = doc("what the end line says beside the verdict (different work per step, a metric with a smaller floor)", optional=True)
    sequential: dict = doc("stop: early: where the sequential design stopped (Sequential)", optional=True)


# The look record (schemas/look.schema.json). 1: first version.
LOOK_VERSION = 1


@typed.record("look", version=LOOK_VERSION)
class LookRecord:
    """looks/<wave>.json: one look of a sequential design (`trials: {stop: early}`) at the blocks so far (compare/looks.py)."""

    incident_id: str = doc("the incident the plan derives from")
    plan_digest: str = doc("blake3 digest of the plan whose design.stop this look follows")
    look: int = doc("0-based index into design.stop.looks")
    looks_planned: int = doc("how many looks the plan fixed in advance")
    blocks: int = doc("blocks this look read: the first `blocks` of the schedule")
    level: float = doc("confidence of this look's interval: 1 - the alpha spent at it")
    stop: bool = doc("no further wave runs")
    why: str = doc("clears_floor, rules_out_min_effect, block_limit or continue")
    verdict: str | None = doc("the verdict of a stopping look; null while continuing")
    estimate_log: float | None = doc("Hodges-Lehmann estimate of log(B/A)")
    low_log: float | None = doc("interval low end at this look's level")
    high_log: float | None = doc("interval high end")
    floor_log: float | None = doc("A/A floor at this look's level")


@dataclass(frozen=True)
class Sequential:
    """comparison.sequential: how a `stop: early` design ended (compare/looks.py)."""

    block_limit: int  # trials.blocks: the most blocks the design may run
    blocks_run: int  # blocks the stopping look read
    look: int  # 1-based number of the stopping look
    looks_planned: int
    level: float  # confidence of the stopping look's interval
    why: str  # clears_floor | rules_out_min_effect | block_limit
    min_effect_pct: float
    method: str

    def to_record(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class MetricChoice:
    """comparison.metric_choice: which job metric the plan chose and why (plan/job_shape.py)."""

    shape: str | None  # collective | pipeline | independent; None for one process
    reason: str
    chosen_by: str  # recording | config
    selector: str  # job=...,role=...

    def to_record(self) -> dict:
        return dataclasses.asdict(self)
