"""Rule entry of `trials` (rules/trials.smk): one block of interleaved A / B / A' runs after its
preflight -> execution/<block>.json."""

from __future__ import annotations

from ..core import records, typed
from ..core.errors import RecordError
from ..plan.types import Plan
from ..preflight.types import Preflight
from .block import run_block
from .types import Execution


def run(plan_path, preflight_path, block: str, store_root, work_root, out_path, *, log_path=None) -> Execution:
    """Read and check the inputs (the preflight checked this very plan), run the block, write the record."""
    plan = typed.read(plan_path, Plan)
    pre = typed.read(preflight_path, Preflight)
    plan_digest = plan.digest()
    if pre.plan_digest != plan_digest:
        raise RecordError(preflight_path, f"preflight checked plan {pre.plan_digest}, not this plan {plan_digest}")
    record = run_block(plan, plan_digest, pre.to_json(), pre.digest(), block, store_root, work_root, log_path=log_path)
    records.write_record(out_path, record.to_json(), "execution")
    return record
