"""Typed record of the comparison stage (schemas/comparison.schema.json), nested parts included.

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
  2: components[], change_explained, predictions, sentence (required from 2 on; a version 1
     record is upgraded with none of them and a sentence saying so: core/records.py).
  2 (additive, same version): metric.per and metric.label, metric_choice, job_metrics, warnings, sequential
     (all optional: a record without them says nothing of them).
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 2


@typed.nested
class Metric:
    """What a run's value is: the plan's resolved metric (plan/metric.py)."""

    name: str = doc("the metric's name")
    source: str = doc("the plan's metric source: auto, recorder_steps, stdout_regex, stdout_steps, process_wall")
    statistic: str = doc("median, mean or min of a run's steps")
    unit: str = doc("always ns")
    per: str = doc("the unit the values are per (plan's trials.metric.per): step, item or token", optional=True)
    label: str = doc("what the end line calls the metric (never a unit it does not have)", optional=True)


@typed.nested
class DesignSummary:
    """The plan's trial design, as the comparison used it."""

    blocks: int = doc("blocks planned")
    runs_per_arm: int = doc("measured runs of A and of B per block")
    control_runs: int = doc("A' (baseline-control) runs per block")
    warmup_runs: int = doc("unmeasured warm-up runs per block")
    seed: int = doc("the schedule's seed")
    max_retries: int = doc("retries of a failed run")
    max_failed_fraction: float = doc("a block with more failed runs is excluded")
    confidence: float = doc("the interval's confidence level")


@typed.nested
class Method:
    """The estimator, interval and decision rule (docs/statistics.md)."""

    schedule: str = doc("counterbalanced_mirrored_rounds")
    per_block: str = doc("log_ratio_of_medians")
    interval: str = doc("hodges_lehmann_signed_rank")
    min_valid_blocks: int = doc("the fewest blocks for which the interval exists at this confidence")
    mde_power: float = doc("the power the minimal detectable effect is stated at")
    max_null_mde_log: float = doc("a no-change verdict needs an MDE below this (log ratio)")


@typed.nested
class Counts:
    """Blocks planned, used and excluded; unusual runs."""

    planned_blocks: int = doc("blocks in the plan")
    valid_blocks: int = doc("blocks averaged into the estimate")
    control_blocks: int = doc("valid blocks with A' runs (they measure the noise floor)")
    excluded_blocks: int = doc("blocks not averaged in")
    excluded_by_reason: dict[str, int] = doc("exclusion (compare/build.py EXCLUSIONS) -> blocks")
    unusual_runs: int = doc("runs whose recorder reported anything unusual")


@typed.nested
class Interval:
    """Hodges-Lehmann estimate and signed-rank interval of candidate/baseline; null: not computable."""

    log_ratio: float | None = doc("estimate of log(candidate/baseline)")
    log_low: float | None = doc("interval low end (null when too few blocks)")
    log_high: float | None = doc("interval high end")
    ratio: float | None = doc("exp(log_ratio): below 1 is faster")
    ratio_low: float | None = doc("exp(log_low)")
    ratio_high: float | None = doc("exp(log_high)")


@typed.nested
class Estimate(Interval):
    """The headline: candidate vs baseline (B/A) with its interval, and the change in percent."""

    change_pct: float | None = doc("(ratio - 1) x 100; negative: faster")


@typed.nested
class NoiseFloor:
    """The A/A (A' vs A) difference the design cannot tell from noise."""

    log: float | None = doc("max |end| of the A'/A interval, as a log ratio")
    pct: float | None = doc("the same in percent")
    control: Interval = doc("the A'/A estimate and interval")


@typed.nested
class Mde:
    """Minimal detectable effect of the design."""

    log: float | None = doc("as a log ratio")
    pct: float | None = doc("in percent")
    power: float = doc("at this power")


@typed.nested
class BlockResult:
    """One block: used or excluded (with the reason), and its paired ratio."""

    block: str = doc("block id, b000...")
    used: bool = doc("averaged into the estimate")
    execution_status: str = doc("complete, too_many_failures, environment_changed or missing")
    exclusion: str | None = doc("why the block is not used (compare/build.py EXCLUSIONS); null when used")
    runs_planned: dict[str, int] = doc("arm (A, B, A') -> measured runs in the schedule")
    runs_ok: dict[str, int] = doc("arm -> runs with a successful attempt")
    failed_runs: int = doc("planned measured runs with no successful attempt")
    failed_attempts: int = doc("failed attempts, retried ones included")
    unusual_runs: int = doc("runs whose recorder reported anything unusual")
    median_ns: dict[str, float | None] = doc("arm -> median metric over its successful runs")
    log_ratio: float | None = doc("log(median B / median A)")
    control_log_ratio: float | None = doc("log(median A' / median A); null without A' runs")


@typed.nested
class Component:
    """One component's paired within-block estimate of candidate - baseline (ns per step), with its own A/A floor."""

    name: str = doc("wall, gpu_busy, host_api, check:<check>, unexplained, span:<name>, excess:<cause>, role:/rank:...")
    label: str = doc("the words used in the sentence")
    group: str = doc("wall, measure, attribution, span, excess or job")
    status: str = doc("resolved, or unresolved: some run in a used block did not observe it (never read as 0)")
    reason: str | None = doc("why unresolved, or why no interval")
    baseline_ns_per_step: float | None = doc("median over used blocks of the baseline arm's median per block")
    delta_ns_per_step: float | None = doc("estimate of candidate - baseline; negative: less time per step")
    interval_ns: list[float | None] = doc("[low, high] at design.confidence (null ends when too few blocks)")
    floor_ns: float | None = doc("max |end| of the A'/A interval of this component")
    clears_floor: bool = doc("the whole interval lies beyond +/- floor_ns (the headline's rule)")
    share_of_change: float | None = doc("delta / the wall component's delta, when the wall delta clears its floor")


@typed.nested
class ChangeExplained:
    """How much of the wall-time change the components explain."""

    wall_delta_ns_per_step: float | None = doc("the wall component's delta")
    attributed_share: float | None = doc("sum of the shares of the checks that cleared their floors")
    unexplained_share: float | None = doc("the unexplained component's share")
    span_share: float | None = doc("sum of the shares of the spans that cleared their floors")
    unresolved: list[str] = doc("components some run did not observe")


@typed.nested
class Prediction:
    """A baseline run's next_experiments bound beside the realized change of that cause."""

    check: str = doc("the check whose cause was predicted")
    component: str = doc("its component, check:<check>")
    bound_ns_per_step: float = doc("median over baseline runs of recoverable_upper_bound_ns / diagnosed steps")
    recovered_ns_per_step: float | None = doc("- delta of the cause's component")
    recovered_interval_ns: list[float | None] = doc("[low, high] of the recovered time")
    wall_recovered_ns_per_step: float | None = doc("- delta of the wall component")
    outcome: str = doc("recovered_bound, less_than_bound, cause_unchanged, cause_grew or unresolved")
    moved_to: list[str] = doc("attribution components that grew beyond their floor")
    note: str = doc("one sentence on the outcome")


@typed.nested
class MetricChoice:
    """A job: which job metric the plan chose and why (plan/job_shape.py)."""

    shape: str | None = doc("collective, pipeline or independent; null for one process")
    reason: str = doc("why the shape chose the default metric")
    chosen_by: str = doc("recording or config")
    selector: str = doc("job=...,role=...")


@typed.nested
class JobMetric:
    """One recorded job metric with its own estimate and A/A floor (compare/job_metrics.py)."""

    selector: str = doc("job=...,role=...")
    label: str = doc("the words used for it")
    config: str = doc("the config line that selects it")
    chosen: bool = doc("the metric the verdict is on")
    change_pct: float | None = doc("(ratio - 1) x 100; negative: faster")
    low_pct: float | None = doc("interval low end, percent")
    high_pct: float | None = doc("interval high end, percent")
    floor_pct: float | None = doc("its own A/A floor, percent")
    verdict: str = doc("faster, slower, no_detectable_change or inconclusive")


@typed.nested
class Sequential:
    """stop: early: how the sequential design ended (compare/looks.py, compare/sequential.py)."""

    block_limit: int = doc("trials.blocks: the most blocks the design may run")
    blocks_run: int = doc("blocks the stopping look read")
    look: int = doc("1-based number of the stopping look")
    looks_planned: int = doc("looks the plan fixed in advance")
    level: float = doc("confidence of the stopping look's interval")
    why: str = doc("clears_floor, rules_out_min_effect, block_limit or continue")
    min_effect_pct: float = doc("the smallest change the design must detect, percent")
    method: str = doc("the sequential method (plan/stopping.py)")


@typed.record("comparison", version=SCHEMA_VERSION)
class Comparison:
    """comparison.json: candidate vs baseline over the plan's blocks, and the verdict (compare/build.py)."""

    incident_id: str = doc("the incident the plan derives from")
    experiment: str | None = doc("the named experiment, null for none")
    plan_digest: str = doc("blake3 digest of the plan record compared")
    execution_digests: dict[str, str] = doc("block id -> digest of its execution record")
    aa_experiment: bool = doc("the candidate is the baseline itself (deliberate A/A run)")
    metric: Metric = doc("what a run's value is (the plan's resolved metric) and its unit")
    design: DesignSummary = doc("the plan's design, summarized")
    method: Method = doc("the estimator, interval and decision rule used (docs/statistics.md)")
    counts: Counts = doc("blocks planned, used and excluded; runs per arm")
    estimate: Estimate = doc("candidate vs baseline (B/A) with its interval")
    noise_floor: NoiseFloor = doc("the A/A (A vs A') difference the design cannot tell from noise")
    mde: Mde = doc("minimal detectable effect of the design")
    verdict: str = doc("faster, slower, no_detectable_change or inconclusive (compare/verdict.py VERDICTS)")
    reasons: list[str] = doc("why this verdict, most decisive first")
    blocks: list[BlockResult] = doc("each block: used or excluded (with the reason), its ratio")
    components: list[Component] = doc("per component of the step time: candidate - baseline with its own A/A floor")
    change_explained: ChangeExplained = doc("how much of the change the components explain")
    predictions: list[Prediction] = doc("the baseline runs' next_experiments bound beside the realized change of that cause")
    sentence: str = doc("the verdict with the components that explain it")
    failure_summary: str = doc("when runs failed: how many blocks had a failed run and the most common reason (exit, rank, exception)", optional=True)
    metric_choice: MetricChoice = doc("a job: its shape, which chose the default metric, and why", optional=True)
    job_metrics: list[JobMetric] = doc("a job: each recorded job metric with its own estimate and A/A floor", optional=True)
    warnings: list[str] = doc("what the end line says beside the verdict (different work per step, a metric with a smaller floor)", optional=True)
    sequential: Sequential = doc("stop: early: where the sequential design stopped", optional=True)


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
