"""Typed record of the plan stage (schemas/plan.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
  2: python_distributions (what preflight compares) and schedule[].warms (the arm a warm-up
     run warms). A version 1 plan reads as version 2 with python_distributions null (not
     observed: records.UPGRADES); its warm-ups carry no `warms` and warm the baseline, as they did.
  2 (additive, same version): design.metric.shape (the job's shape read from the recording, which decided the default job
     metric, and why; a pipeline's wait_share per role and bound_role), design.metric.declared_work / items_per_step / tokens_per_step (work per
     step declared from each arm's argv) and design.stop (the sequential design). All optional:
     a plan without them is a fixed design with no shape recorded.
  2 (same version, same JSON): arms are frozen classes, Arms of two Arm with their Source files
     (issue 37); the design a frozen Design with its PlanMetric (JobShape, DeclaredWork) and Stop
     (StopLook); schedule, workload and
     environment stay dicts (docs/architecture.md says why).
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 2


@typed.nested
class Source:
    """One of an arm's source files, by digest, materialized into its work directory."""

    relpath: str = doc("where the file goes, relative to the source root")
    digest: str = doc("blake3 digest of its bytes in the store")


@typed.nested
class Arm:
    """One arm of the experiment: what its runs start (plan/rebuild.py materialize_arm)."""

    argv: list = doc("argv list; never run through a shell")
    env: dict = doc("allow-listed environment only: name -> value (a map keyed by data)")
    changes: dict = doc("what differs from the incident's workload (empty for the baseline): the config's "
                        "set_args, remove_args, append_args, env and the sources' changes, each optional")
    same_as_baseline: bool = doc("true for a deliberate A/A experiment", optional=True)
    sources: list[Source] = doc("the arm's source files by digest", optional=True)


@typed.nested
class Artifact:
    """A file the trials must find, pinned by digest (preflight checks it; rebuild materializes sources)."""

    role: str = doc("source, binary, library, input or patch: what it is to the workload")
    path: str = doc("absolute path where it was at capture")
    digest: str = doc("blake3 digest of its bytes")
    size: int = doc("its size in bytes")
    relpath: str | None = doc("path relative to the source root (source files), where the work directory places it",
                              optional=True)


@typed.nested
class Workload:
    """The recorded command the arms derive from (the snapshot's workload, its env allow-listed)."""

    argv: list = doc("argv list; never run through a shell")
    cwd: str = doc("the working directory it ran in")
    env: dict = doc("allow-listed environment only: a map keyed by variable name")


@typed.nested
class Arms:
    """Baseline (A, A' and the warm-ups that warm it) and candidate (B)."""

    baseline: Arm = doc("the incident's own workload")
    candidate: Arm = doc("the workload with the config's changes (or the baseline again: an A/A experiment)")


@typed.nested
class JobShape:
    """The job's shape read from the recording before any trial (plan/job_shape.py), which decided
    the default job metric, and why."""

    kind: str = doc("collective, pipeline or independent")
    reason: str = doc("why, in words")
    chosen_by: str = doc("recording: the metric is the shape's default; config: the user's trials.metric chose it")
    wait_share: dict = doc("a pipeline with declared roles: role -> its share of counted step time in queue spans "
                           "(a map keyed by role)", optional=True)
    bound_role: str = doc("a pipeline's feeding role whose throughput is the default job value", optional=True)


@typed.nested
class DeclaredWork:
    """The config's work per step evaluated from each arm's argv (plan/work.py declared)."""

    unit: str = doc("item or token")
    expression: str = doc("the config's expression over flags and numbers")
    A: float = doc("work per step of the baseline's argv")
    B: float = doc("work per step of the candidate's argv")


@typed.nested
class PlanMetric:
    """The plan's resolved metric (plan/metric.py resolve): what one run's value is. The config's
    `trials.metric` stays a dict until the plan is built (resolve, work.py and job_metric.py refine
    it before any plan exists); plan/build.py turns the resolved dict into this class, the one
    boundary. The run-side readers that share code with those checks (metric.read, describe,
    job_metric.reduce/alternates/describe) take `to_json()` of it."""

    name: str = doc("the metric's name")
    source: str = doc("auto, recorder_steps, stdout_regex, stdout_steps or process_wall (plan/metric.py)")
    statistic: str = doc("how one run's step times reduce to one value: median, mean or min")
    unit: str = doc("ns")
    regex: str | None = doc("stdout_regex: first group is the value", optional=True)
    skip_steps: int = doc("leading steps of each run left out (absent: 0)", optional=True)
    per: str = doc("step, item or token (absent: step)", optional=True)
    step_pattern: str | None = doc("stdout_steps (and auto): regex with a named duration group", optional=True)
    cpu_wait: str = doc("counted or removed (absent: counted)", optional=True)
    job: str = doc("a multi-process run's value: slowest_rank, wall or throughput (plan/job_metric.py)", optional=True)
    role: str | None = doc("count only the ranks of this role", optional=True)
    ranks: list | None = doc("count only these ranks", optional=True)
    expect_ranks: list = doc("the incident's ranks: a run in which one wrote no steps fails", optional=True)
    tokens_per_step: str | None = doc("work per step declared as an expression over each arm's argv", optional=True)
    items_per_step: str | None = doc("work per step declared as an expression over each arm's argv", optional=True)
    shape: JobShape = doc("the job's shape, which decided the default job metric", optional=True)
    declared_work: DeclaredWork = doc("the declared work per step evaluated for A and B", optional=True)


@typed.nested
class StopLook:
    """One look of a sequential design: after how many blocks, at what share of the error."""

    blocks: int = doc("blocks run when this look comes")
    alpha: float = doc("the error this look spends: its interval is at level 1 - alpha")


@typed.nested
class Stop:
    """trials: {stop: early}: the sequential design's looks, fixed before any run (plan/stopping.py
    design makes it from the config, compare/sequential.py and looks.py read it): the config side
    builds this same class, so both sides read one thing."""

    rule: str = doc("early")
    method: str = doc("the spending method (compare/sequential.py cites it)")
    block_limit: int = doc("blocks at most")
    wave_blocks: int = doc("blocks per wave after the first look")
    min_effect_log: float = doc("the change a no-change stop must rule out, as a log ratio")
    looks: list[StopLook] = doc("the looks in order; their alphas sum to 1 - confidence")


@typed.nested
class Design:
    """The trial design (plan/build.py): how many blocks and runs, retries, confidence, and the
    resolved metric (a PlanMetric) and, for `stop: early`, its Stop."""

    blocks: int = doc("blocks planned")
    runs_per_arm: int = doc("measured runs of A and of B per block")
    control_runs: int = doc("A' (baseline re-run) runs per block, for the noise floor")
    warmup_runs: int = doc("unmeasured warm-up runs per arm per block")
    seed: int = doc("the schedule's seed")
    max_retries: int = doc("attempts after the first for a failed run")
    max_failed_fraction: float = doc("a block with more failed runs is excluded")
    confidence: float = doc("the interval's confidence level")
    metric: PlanMetric = doc("the resolved metric (plan/metric.py resolve): name, source, statistic, unit and the rest")
    run_timeout_s: float = doc("a run still going after this is killed (absent: the runner's default)", optional=True)
    record_runs: bool = doc("run the recorder in every trial run (absent: off)", optional=True)
    repeat: int = doc("the config's trials.repeat: a repeat of the same design is a new plan", optional=True)
    stop: Stop = doc("trials: {stop: early}: the sequential design's looks (absent: a fixed design)", optional=True)


@typed.record("plan", version=SCHEMA_VERSION)
class Plan:
    """plan.json: everything a trial needs, pinned by digest (plan/build.py); its digest is the plan's identity."""

    incident_id: str = doc("the incident the plan derives from")
    experiment: str | None = doc("null: the incident's own environment; a name: an explicitly new experiment")
    snapshot_digest: str = doc("blake3 digest of the snapshot record planned from")
    artifacts: list[Artifact] = doc("the incident's artifacts (role, path, relpath, digest, size) the trials must find")
    workload: Workload = doc("the recorded command: argv (never a shell), cwd and the allow-listed env")
    arms: Arms = doc("baseline and candidate: argv, env, changes, sources by digest, same_as_baseline")
    design: Design = doc("blocks, runs per arm, warm-up and control runs, seed, retries, confidence and the resolved metric")
    schedule: dict = doc("block id -> its runs in order (index, arm; warms for a warm-up run)")
    environment: dict = doc("the environment fingerprint the trial node must match (preflight)")
    python_distributions: dict | None = doc("name -> version of the distributions the workload imported; "
                                            "null: not observed", optional=True)
    source_root: str | None = doc("root of the recorded source tree (source artifacts' relpath is relative to it)",
                                  optional=True)
