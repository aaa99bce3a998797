"""Rule entry of `plan` (rules/plan.smk): the snapshot record -> the run's plan.json (also stored in the CAS)."""

from __future__ import annotations

from ..core import typed
from ..snapshot.types import Snapshot
from .build import build_plan, write_plan


def run(snapshot_path, store_root, out_path, *, design: dict, candidate, experiment=None, source_repo=None) -> str:
    """Read the snapshot record, build and write the plan; returns its digest."""
    snapshot = typed.read(snapshot_path, Snapshot)
    plan = build_plan(snapshot.to_json(), snapshot.digest(), store_root, design=dict(design),
                      candidate=candidate, experiment=experiment, source_repo=source_repo)
    return write_plan(plan, out_path, store_root)
