"""Typed records written by foundation code: the incident manifest, the latest-run pointer and the
mark of a run that made its comparison (the one kind of run the pointer may move to).

Version history (bump the constant, and the schema's schema_version, when a field changes meaning):
  incident_manifest (schemas/incident_manifest.schema.json) 1: first version.
  latest (schemas/latest.schema.json) 1: first version.
  made (schemas/made.schema.json) 1: first version.
"""

from __future__ import annotations

from . import typed
from .typed import doc

MANIFEST_VERSION = 1
LATEST_VERSION = 1
MADE_VERSION = 1


@typed.record("latest", version=LATEST_VERSION)
class Latest:
    """results/<incident>/latest.json: which run results/<incident>/ shows (core/layout.py)."""

    incident_id: str = doc("the incident")
    run: str = doc("run key: aa (A/A), ab (A/B) or exp (named experiment) and 12 hex digits of the plan inputs")
    run_dir: str = doc("the run's directory, relative to results/<incident>/")
    plan_digest: str = doc("blake3 digest of the run's plan.json")


@typed.record("made", version=MADE_VERSION)
class Made:
    """results/<incident>/runs/<run>/made.json: the run made its comparison (report/rule.py run_made).
    A run whose runs all failed has none: its rule fails, so the same command fails again."""

    incident_id: str = doc("the incident")
    run: str = doc("run key: aa (A/A), ab (A/B) or exp (named experiment) and 12 hex digits of the plan inputs")
    comparison_digest: str = doc("blake3 digest of the run's comparison.json, the one that was made")


@typed.nested
class SourceStatus:
    """What one source of an incident recorded, or why it did not (the manifest's sources map)."""

    status: str = doc("observed or not_observed")
    reason: str | None = doc("why not observed (null: observed)")
    detail: dict = doc("what the source says of itself (dumps, versions, ...)", optional=True)


@typed.record("incident_manifest", version=MANIFEST_VERSION)
class IncidentManifest:
    """incidents/<incident>/manifest.json: what an incident holds (core/incident.py)."""

    incident_id: str = doc("the incident's id (its directory's name)")
    created_unix_ns: int = doc("when the incident was written, ns since the Unix epoch")
    reason: str = doc("why: workload_boundary, latency_change, sigusr1, exit, step_pattern")
    clock: dict = doc("which clock the tables' timestamps are on")
    sources: dict[str, SourceStatus] = doc("source name -> what it recorded or why it did not")
    tables: dict = doc("table name -> {path, rows, digest} of the Parquet tables")
    tables_version: int = doc("version of the table contracts (core/tables.py TABLES_VERSION)")
    trigger: dict | None = doc("what fired the snapshot (null: no trigger)", optional=True)
    producer: str = doc("recorder, sidecar, kineto-import, torch-fr-import, ...", optional=True)
    window: dict | None = doc("the time window the incident covers (null: the whole run)", optional=True)
    ranks: list = doc("the ranks the incident holds", optional=True)
    provenance: dict = doc("how the workload was built and run", optional=True)
    artifacts: list = doc("sources, inputs, binaries and libraries by role and digest", optional=True)
    workload: dict | None = doc("argv, cwd and env of the workload (null: not recorded)", optional=True)
    recorder: dict | None = doc("budgets, usage, dropped counts, targets and errors of the recorder", optional=True)
    job: dict | None = doc("the run of the job this incident is, its launcher, ranks and roles (null: one process, or not recorded)", optional=True)
