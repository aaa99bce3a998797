"""Rule entry of `preflight` (rules/preflight.smk): on the node that runs a block, check it is the
planned environment; write preflight/<block>.json, or refuse the block."""

from __future__ import annotations

from ..core import records, typed
from ..core.errors import PreflightBlocked
from ..plan.types import Plan
from .check import preflight, readable_diff


def run(plan_path, block: str, store_root, out_path, *, results_dir, blocked_path=None) -> dict:
    """Write the record; if blocked, keep it at `blocked_path` (the rule's
    logs/preflight-<block>.json, docs/cluster.md) and raise with the diff. No record at
    out_path then, so the block's trials never start."""
    plan = typed.read(plan_path, Plan)
    record = preflight(plan, plan.digest(), block, store_root, results_dir=results_dir)
    if record["status"] == "blocked":
        if blocked_path:
            records.write_record(blocked_path, record, "preflight")
        raise PreflightBlocked(out_path, readable_diff(record).replace("\n", " | "))
    records.write_record(out_path, record, "preflight")
    return record
