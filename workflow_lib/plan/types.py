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
     (issue 37); the design a frozen Design, its metric and stop still dicts; schedule, workload and
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
class Arms:
    """Baseline (A, A' and the warm-ups that warm it) and candidate (B)."""

    baseline: Arm = doc("the incident's own workload")
    candidate: Arm = doc("the workload with the config's changes (or the baseline again: an A/A experiment)")


@typed.nested
class Design:
    """The trial design (plan/build.py): how many blocks and runs, retries, confidence, and the
    resolved metric. `metric` and `stop` stay dicts: plan/metric.py, job_metric.py, stopping.py
    and compare/sequential.py read the config's metric and stop with the same code before any
    plan exists, so typing them is one class both sides read (left for a later step)."""

    blocks: int = doc("blocks planned")
    runs_per_arm: int = doc("measured runs of A and of B per block")
    control_runs: int = doc("A' (baseline re-run) runs per block, for the noise floor")
    warmup_runs: int = doc("unmeasured warm-up runs per arm per block")
    seed: int = doc("the schedule's seed")
    max_retries: int = doc("attempts after the first for a failed run")
    max_failed_fraction: float = doc("a block with more failed runs is excluded")
    confidence: float = doc("the interval's confidence level")
    metric: dict = doc("the resolved metric (plan/metric.py resolve): name, source, statistic, unit and the rest")
    run_timeout_s: float = doc("a run still going after this is killed (absent: the runner's default)", optional=True)
    record_runs: bool = doc("run the recorder in every trial run (absent: off)", optional=True)
    repeat: int = doc("the config's trials.repeat: a repeat of the same design is a new plan", optional=True)
    stop: dict = doc("trials: {stop: early}: the sequential design's looks (absent: a fixed design)", optional=True)


@typed.record("plan", version=SCHEMA_VERSION)
class Plan:
    """plan.json: everything a trial needs, pinned by digest (plan/build.py); its digest is the plan's identity."""

    incident_id: str = doc("the incident the plan derives from")
    experiment: str | None = doc("null: the incident's own environment; a name: an explicitly new experiment")
    snapshot_digest: str = doc("blake3 digest of the snapshot record planned from")
    artifacts: list = doc("the incident's artifacts (role, path, relpath, digest, size) the trials must find")
    workload: dict = doc("the recorded command: argv (never a shell), cwd and the allow-listed env")
    arms: Arms = doc("baseline and candidate: argv, env, changes, sources by digest, same_as_baseline")
    design: Design = doc("blocks, runs per arm, warm-up and control runs, seed, retries, confidence and the resolved metric")
    schedule: dict = doc("block id -> its runs in order (index, arm; warms for a warm-up run)")
    environment: dict = doc("the environment fingerprint the trial node must match (preflight)")
    python_distributions: dict | None = doc("name -> version of the distributions the workload imported; "
                                            "null: not observed", optional=True)
    source_root: str | None = doc("root of the recorded source tree (source artifacts' relpath is relative to it)",
                                  optional=True)
