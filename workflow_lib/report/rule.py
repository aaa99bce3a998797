"""Rule entries of the report stage (rules/report.smk): `report` writes the run's page and its
Perfetto trace; `latest` then points results/<incident>/ at that run."""

from __future__ import annotations

import os
from pathlib import Path

from ..core import layout, typed
from ..plan.types import Plan
from .build import write_report_files


def run(snapshot_path, diagnosis_path, plan_path, comparison_path, store_root, out_path) -> Path:
    """The page (and trace.perfetto.json beside it, linked from it) from the run's records."""
    return write_report_files(snapshot_path, diagnosis_path, plan_path, comparison_path, store_root, out_path)


def run_latest(plan_path: str | os.PathLike, results: str, incident: str, run: str, *,
               log_path: str | os.PathLike | None = None) -> str:
    """Point results/<incident>/ at `run` (whose plan is `plan_path`; core/layout.py's point_latest).
    The notes about names that are not links (an older layout's files, left untouched) go to the rule's log."""
    notes = layout.point_latest(results, incident, run, typed.read(plan_path, Plan).digest())
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("".join(n + "\n" for n in notes), encoding="utf-8")
    return f"latest: {run}"
