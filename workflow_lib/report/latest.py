"""Rule entry of `latest` (rules/report.smk): once a run's report is written, results/<incident>/
shows that run (links, and latest.json saying which; core/layout.py's point_latest), but only
a run that produced a comparison: one whose runs all failed leaves the latest where it was."""

from __future__ import annotations

import os
from pathlib import Path

from ..core import layout, records
from ..core.errors import StallcaseError


def why_no_comparison(comparison: dict) -> str | None:
    """Why a comparison record is not a comparison (too few valid blocks because runs failed),
    or None when it is one (a verdict was drawn, whatever it is)."""
    counts, method = comparison.get("counts", {}), comparison.get("method", {})
    if comparison.get("failure_summary") and counts.get("valid_blocks", 0) < method.get("min_valid_blocks", 1):
        return (f"no comparison could be made: {counts.get('valid_blocks', 0)} valid block(s), "
                f"{method.get('min_valid_blocks')} needed; {comparison['failure_summary']}")
    return None


def write_latest(plan_path: str | os.PathLike, comparison_path: str | os.PathLike, results: str, incident: str, run: str, *,
                 log_path: str | os.PathLike | None = None) -> str:
    """Point results/<incident>/ at `run` (whose plan is `plan_path`) when its comparison was made.
    When it was not, the previous run stays the latest: its latest.json is written again (Snakemake
    removed it before this job), and the end line says why (report/terminal.py); with no previous
    run there is nothing to show, and the error says why. The
    notes about names that are not links (an older layout's files, left untouched) go to the log."""
    why = why_no_comparison(records.read_record(comparison_path, "comparison"))
    if why is None:
        notes = layout.point_latest(results, incident, run, records.digest_of(records.read_record(plan_path, "plan")))
        summary = f"latest: {run}"
    else:
        link = Path(layout.incident_dir(results, incident)) / layout.LATEST
        prev = os.readlink(link).split("/")[-1] if link.is_symlink() else None
        prev_plan = Path(layout.plan(results, incident, prev)) if prev and prev != run else None
        if prev_plan is None or not prev_plan.is_file():
            raise StallcaseError(comparison_path, f"{why}; results/{incident}/ shows no run yet")
        notes = layout.point_latest(results, incident, prev, records.digest_of(records.read_record(prev_plan, "plan")))
        notes.append(f"not moved to {run} ({why}); results/{incident}/ still shows {prev}")
        summary = f"latest: still {prev}"
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("".join(n + "\n" for n in notes), encoding="utf-8")
    return summary
