"""Typed record of the preflight stage (schemas/preflight.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 1


@typed.record("preflight", version=SCHEMA_VERSION)
class Preflight:
    """preflight/<block>.json: is the node that runs this block the planned environment?"""

    block: str = doc("the block's id (b000, b001, ...)")
    plan_digest: str = doc("blake3 digest of the plan the block belongs to")
    incident_id: str = doc("the incident the plan derives from")
    experiment: str | None = doc("the named experiment (--config experiment=NAME), null for none")
    node: str = doc("host name of the node that ran the check")
    status: str = doc("pass, blocked or new_experiment")
    differences: list = doc("each field whose planned and observed values differ")
    missing: list = doc("artifacts the plan pins that this node lacks")
    environment: dict = doc("the node's environment fingerprint (core/environment.py)")
    checked_unix_ns: int = doc("when the check ran, ns since the Unix epoch", optional=True)
