"""Rule entries of `compare` (rules/compare.smk): the plan and every block's execution -> comparison.json
(`run`); with `trials: {stop: early}`, one look per wave -> looks/<wave>.json (`run_look`)."""

from __future__ import annotations

import os

from ..core import records, typed
from ..core.errors import RecordError
from ..plan.types import Plan
from ..trials.types import Execution
from .build import compare
from .looks import look_record


def _read(plan_path, execution_paths) -> tuple[Plan, dict[str, Execution], dict[str, str]]:
    plan = typed.read(plan_path, Plan)
    executions: dict[str, Execution] = {}
    digests: dict[str, str] = {}
    for path in execution_paths:
        rec = typed.read(path, Execution)
        if rec.block in executions:
            raise RecordError(path, f"a second execution record for block {rec.block!r}")
        executions[rec.block], digests[rec.block] = rec, rec.digest()
    return plan, executions, digests


def run(plan_path: str | os.PathLike, execution_paths: list[str | os.PathLike], out_path: str | os.PathLike) -> str:
    """Read the plan and execution records, write comparison.json; returns its digest.

    Digests are of the records as read (canonical JSON), so the comparison points at
    exactly the plan and executions it was computed from.
    """
    plan, executions, digests = _read(plan_path, execution_paths)
    comparison = compare(plan, executions, digests, plan.digest())
    return records.write_record(out_path, comparison.to_json(), "comparison")


def run_look(plan_path: str | os.PathLike, execution_paths: list[str | os.PathLike], wave: str,
             out_path: str | os.PathLike) -> str:
    """Checkpoint `look`: judge the blocks so far, write looks/<wave>.json; returns its digest."""
    plan, executions, _ = _read(plan_path, execution_paths)
    return records.write_record(out_path, look_record(plan, executions, wave).to_json(), "look")
