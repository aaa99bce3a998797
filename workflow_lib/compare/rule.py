"""Rule entry of `compare` (rules/compare.smk): the plan and every block's execution -> comparison.json."""

from __future__ import annotations

import os

from ..core import records, typed
from ..core.errors import RecordError
from ..plan.types import Plan
from ..trials.types import Execution
from .build import compare


def run(plan_path: str | os.PathLike, execution_paths: list[str | os.PathLike], out_path: str | os.PathLike) -> str:
    """Read the plan and execution records, write comparison.json; returns its digest.

    Digests are of the records as read (canonical JSON), so the comparison points at
    exactly the plan and executions it was computed from.
    """
    plan = typed.read(plan_path, Plan)
    executions: dict[str, Execution] = {}
    digests: dict[str, str] = {}
    for path in execution_paths:
        rec = typed.read(path, Execution)
        if rec.block in executions:
            raise RecordError(path, f"a second execution record for block {rec.block!r}")
        executions[rec.block], digests[rec.block] = rec, rec.digest()
    comparison = compare(plan, executions, digests, plan.digest())
    return records.write_record(out_path, comparison.to_json(), "comparison")
