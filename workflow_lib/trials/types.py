"""Typed record of the trials stage (schemas/execution.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
  2: runs carry metric_source, work (items/tokens per step) and capture.components (all
     optional: a version 1 record reads as version 2 unchanged, its runs without them).
  3: every run carries metric_source, work, ranks, alternates and capture, null where not
     measured (a single-process run has no ranks or alternates, a plan without record_runs no
     capture), so readers index them; records.UPGRADES fills them null in a version 1 or 2
     record's runs (what those records meant by leaving them out).
  3 (same version, same JSON): each run is a frozen `Run` (issue 37), its work, ranks, capture and
     capture.components nested classes too; gpu and alternates stay dicts (see Run).
"""

from __future__ import annotations

import dataclasses

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 3


@typed.nested
class Work:
    """Median work per counted step that the run's steps declared (rec.step(i, items=..., tokens=...))."""

    items_per_step: float | None = doc("items per step; null when the steps declared none")
    tokens_per_step: float | None = doc("tokens per step; null when the steps declared none")


@typed.nested
class Rank:
    """One process of a multi-process run (plan/job_metric.py reduce)."""

    rank: int | None = doc("the process's rank; null when it did not say")
    role: str | None = doc("the process's role; null when it did not say")
    steps: int = doc("its counted steps (after skip_steps)")
    median_ns: float = doc("its own median step time, ns per unit")
    total_ns: float = doc("the sum of its counted step times, ns (absent in older records)", optional=True)
    counted: bool = doc("the job metric counts this rank (absent in older records: every listed rank was)", optional=True)


@typed.nested
class StepBound:
    """One of the run's own diagnosis's next experiments, as a bound per measured step."""

    check: str = doc("the check the experiment addresses")
    bound_ns_per_step: float = doc("recoverable_upper_bound_ns over the measured steps, ns per step")


@typed.nested
class RunComponents:
    """Per-step means of the run's components over its measured steps (trials/components.py)."""

    statistic: str = doc("always mean: means add up")
    steps: int = doc("measured steps behind the means")
    values_ns: dict[str, float | None] = doc("component name -> ns per step; null where not observed (a map keyed by data)")
    unobserved: dict[str, str] = doc("component name (or prefix:*) -> why it is null")
    excess_available: bool = doc("the diagnosis had excess by cause: a cause absent from values_ns is 0")
    spans_available: bool = doc("the run recorded top-level spans: a span absent from values_ns is 0")
    next_experiments: list[StepBound] = doc("the run's own diagnosis's next experiments, in its order")


@typed.nested
class Capture:
    """With design.record_runs: the run's own incident and its diagnosis (trials/observe.py)."""

    incident: str = doc("the run's incident directory")
    diagnosis: str | None = doc("its diagnosis.json; null when diagnosing failed")
    error: str | None = doc("why diagnosing failed; null when it did not")
    explained_ns: int = doc("the diagnosis's explained time, ns", optional=True)
    unexplained_ns: int = doc("the diagnosis's unexplained time, ns", optional=True)
    components: RunComponents = doc("per-step components (absent when diagnosing failed, or in version 1)", optional=True)


@typed.nested
class Run:
    """One attempt of one scheduled run: what trials/runner.py's runners return and the block
    writes. Its fields are keyword-only (KW_ONLY) so that the optional error and stderr_tail keep
    their place in the JSON, which is field order: the digests of executions written before the
    class existed stay the same. `gpu` stays a dict: its schema is open (the NVML watch adds its
    sample counts and clocks), and `alternates` is a map keyed by job-metric name."""

    _: dataclasses.KW_ONLY
    index: int = doc("the schedule entry's index")
    arm: str = doc("warmup, A (baseline), B (candidate) or A' (baseline control)")
    attempt: int = doc("0 for the first attempt, then each retry")
    status: str = doc("ok or failed")
    exit_code: int | None = doc("the process's exit status; null when it timed out or never started")
    start_unix_ns: int = doc("when the run started, ns since the Unix epoch")
    end_unix_ns: int = doc("when it ended")
    metric_ns: float | None = doc("the run's value: the design's statistic of values_ns; null when failed")
    values_ns: list = doc("per-step times per unit of design.metric.per (or the parsed value, or the wall time)")
    gpu: dict = doc("the GPU watch's summary: status (observed, not_observed), reason, and its samples when observed")
    unusual: list = doc("what the recorder (or the host's load) reported as unusual")
    error: str | None = doc("why it failed, naming the rank and exception when the output says", optional=True)
    metric_source: str | None = doc("where the values came from (metric.py); null when failed before its metric was read")
    work: Work | None = doc("median work per counted step; null when the steps declared none")
    stderr_tail: list = doc("a failed run's last stderr lines", optional=True)
    ranks: list[Rank] | None = doc("a multi-process run's processes; null for one process")
    capture: Capture | None = doc("with record_runs: the run's own incident and diagnosis; null otherwise")
    alternates: dict | None = doc("a multi-process run: its value under each other job metric (a map keyed by "
                                  "job metric); null otherwise")

    def failed(self, error: str) -> "Run":
        return dataclasses.replace(self, status="failed", metric_ns=None, values_ns=[], error=error)


@typed.record("execution", version=SCHEMA_VERSION)
class Execution:
    """execution/<block>.json: one block's runs on one node, every attempt, failed ones included (trials/block.py)."""

    block: str = doc("the block's id (b000, b001, ...)")
    plan_digest: str = doc("blake3 digest of the plan the block belongs to")
    preflight_digest: str = doc("blake3 digest of the preflight record that let the block run")
    node: str = doc("host name of the node that ran the block")
    status: str = doc("complete, too_many_failures or environment_changed (compare excludes the last two)")
    runs: list[Run] = doc("every attempt in run order, failed ones included")
    started_unix_ns: int = doc("when the block's first run started, ns since the Unix epoch", optional=True)
    ended_unix_ns: int = doc("when the block's last run ended, ns since the Unix epoch", optional=True)
    notes: list = doc("why the status, and what the block's metric was", optional=True)
