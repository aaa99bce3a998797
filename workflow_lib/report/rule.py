"""Rule entries of the report stage (rules/report.smk): `report` writes the run's page and its
Perfetto trace; `made` marks a run that made its comparison (and fails for one that could not);
`latest` then points results/<incident>/ at that run."""

from __future__ import annotations

import os
from pathlib import Path

from ..compare.types import Comparison
from ..core import layout, records, typed
from ..core.errors import StallcaseError
from ..core.types import Made
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


def run_made(comparison_path: str | os.PathLike, incident: str, run: str, out_path: str | os.PathLike) -> str:
    """Mark `run` as one that made its comparison (made.json), or fail saying why it could not.
    Failing is the point: a failed job leaves no output, so the same command runs this job again
    and fails again with the same end line (report/terminal.py), instead of finding every output
    present and saying "Nothing to be done"; and `latest`, which needs this mark, never moves to it."""
    comparison = typed.read(comparison_path, Comparison)
    why = why_no_comparison(comparison)
    if why is not None:
        raise StallcaseError(comparison_path, why)
    made = Made(incident_id=incident, run=run, comparison_digest=comparison.digest())
    records.write_record(out_path, made.to_json(), "made")
    return f"made: {run}"


def run_latest(plan_path: str | os.PathLike, made_path: str | os.PathLike, results: str, incident: str, run: str, *,
               log_path: str | os.PathLike | None = None) -> str:
    """Point results/<incident>/ at `run` (whose plan is `plan_path`; core/layout.py's point_latest).
    Only a run that made its comparison gets here (`made_path`, run_made's mark, is this rule's
    input). The notes about names that are not links (an older layout's files, left untouched)
    go to the rule's log."""
    made = typed.read(made_path, Made)
    if made.run != run:
        raise StallcaseError(made_path, f"marks run {made.run}, not {run}")
    notes = layout.point_latest(results, incident, run, typed.read(plan_path, Plan).digest())
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("".join(n + "\n" for n in notes), encoding="utf-8")
    return f"latest: {run}"
