"""Typed record of the trials stage (schemas/execution.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
  2: runs carry metric_source, work (items/tokens per step) and capture.components (all
     optional: a version 1 record reads as version 2 unchanged, its runs without them).
  3: every run carries metric_source, work, ranks, alternates and capture, null where not
     measured (a single-process run has no ranks or alternates, a plan without record_runs no
     capture), so readers index them; records.UPGRADES fills them null in a version 1 or 2
     record's runs (what those records meant by leaving them out).
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 3


@typed.record("execution", version=SCHEMA_VERSION)
class Execution:
    """execution/<block>.json: one block's runs on one node, every attempt, failed ones included (trials/block.py)."""

    block: str = doc("the block's id (b000, b001, ...)")
    plan_digest: str = doc("blake3 digest of the plan the block belongs to")
    preflight_digest: str = doc("blake3 digest of the preflight record that let the block run")
    node: str = doc("host name of the node that ran the block")
    status: str = doc("complete, too_many_failures or environment_changed (compare excludes the last two)")
    runs: list = doc("every attempt in run order, as trials/runner.py RunResult.record() writes it")
    started_unix_ns: int = doc("when the block's first run started, ns since the Unix epoch", optional=True)
    ended_unix_ns: int = doc("when the block's last run ended, ns since the Unix epoch", optional=True)
    notes: list = doc("why the status, and what the block's metric was", optional=True)
