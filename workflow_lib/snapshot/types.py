"""Typed record of the snapshot stage (schemas/snapshot.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 1


@typed.record("snapshot", version=SCHEMA_VERSION)
class Snapshot:
    """results/<incident>/snapshot.json: the incident's tables and artifacts, by digest, in the store."""

    incident_id: str = doc("the incident's id (its directory's name)")
    manifest_digest: str = doc("blake3 hex digest of the incident's manifest.json")
    reason: str = doc("why the incident was taken (the manifest's reason)")
    clock: dict = doc("the manifest's clock: which clock the tables' timestamps are on")
    sources: dict = doc("source name -> what it recorded or why it did not (the manifest's sources)")
    tables: dict = doc("table name -> {digest, rows}: the Parquet tables in the store")
    artifacts: list = doc("artifacts by role and digest, each stored or verified in place")
    created_unix_ns: int = doc("when the incident was written, ns since the Unix epoch", optional=True)
    producer: str = doc("what wrote the incident: recorder, sidecar, kineto-import, ...", optional=True)
    window: dict | None = doc("the time window the incident covers (null: the whole run)", optional=True)
    ranks: list = doc("the ranks the incident holds", optional=True)
    provenance: dict = doc("how the workload was built and run (the manifest's provenance)", optional=True)
    workload: dict | None = doc("argv, cwd and env of the workload (null: not recorded)", optional=True)
    recorder: dict | None = doc("the recorder's budgets, usage and errors (null: not a recorder incident)", optional=True)
    job: dict | None = doc("the run of the job this incident is, its launcher, ranks and roles (null: one process, or not recorded)", optional=True)
