"""Rule entries of the report stage (rules/report.smk): `report` writes the run's page and its
Perfetto trace; `latest` then points results/<incident>/ at that run, if it made a comparison."""

from __future__ import annotations

import os
from pathlib import Path

from ..compare.types import Comparison
from ..core import layout, typed
from ..core.errors import StallcaseError
from ..plan.types import Plan
from .build import write_report_files


def run(snapshot_path, diagnosis_path, plan_path, comparison_path, store_root, out_path) -> Path:
    """The page (and trace.perfetto.json beside it, linked from it) from the run's records."""
    return write_report_files(snapshot_path, diagnosis_path, plan_path, comparison_path, store_root, out_path)


def why_no_comparison(comparison: Comparison) -> str | None:
    """Why a comparison record is not a comparison (too few valid blocks because runs failed),
    or None when it is one (a verdict was drawn, whatever it is)."""
    valid, needed = comparison.counts.valid_blocks, comparison.method.min_valid_blocks
    if comparison.failure_summary and valid < needed:
        return f"no comparison could be made: {valid} valid block(s), {needed} needed; {comparison.failure_summary}"
    return None


def run_latest(plan_path: str | os.PathLike, comparison_path: str | os.PathLike, results: str, incident: str, run: str, *,
               log_path: str | os.PathLike | None = None) -> str:
    """Point results/<incident>/ at `run` (whose plan is `plan_path`; core/layout.py's point_latest)
    when its comparison was made, so only a run that produced a comparison becomes the latest.
    When it was not, the previous run stays the latest: its latest.json is written again (Snakemake
    removed it before this job), and the end line says why (report/terminal.py); with no previous
    run there is nothing to show, and the error says why. The notes about names that are not
    links (an older layout's files, left untouched) go to the rule's log."""
    why = why_no_comparison(typed.read(comparison_path, Comparison))
    if why is None:
        notes = layout.point_latest(results, incident, run, typed.read(plan_path, Plan).digest())
        summary = f"latest: {run}"
    else:
        link = Path(layout.incident_dir(results, incident)) / layout.LATEST
        prev = os.readlink(link).split("/")[-1] if link.is_symlink() else None
        prev_plan = Path(layout.plan(results, incident, prev)) if prev and prev != run else None
        if prev_plan is None or not prev_plan.is_file():
            raise StallcaseError(comparison_path, f"{why}; results/{incident}/ shows no run yet")
        notes = layout.point_latest(results, incident, prev, typed.read(prev_plan, Plan).digest())
        notes.append(f"not moved to {run} ({why}); results/{incident}/ still shows {prev}")
        summary = f"latest: still {prev}"
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("".join(n + "\n" for n in notes), encoding="utf-8")
    return summary
