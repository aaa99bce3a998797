"""Rule entry of `latest` (rules/report.smk): once a run's report is written, results/<incident>/
shows that run (links, and latest.json saying which; core/layout.py's point_latest)."""

from __future__ import annotations

import os
from pathlib import Path

from ..core import layout, records


def write_latest(plan_path: str | os.PathLike, results: str, incident: str, run: str, *,
                 log_path: str | os.PathLike | None = None) -> str:
    """Point results/<incident>/ at `run` (whose plan is `plan_path`). The notes about names
    that are not links (an older layout's files, left untouched) go to the rule's log."""
    notes = layout.point_latest(results, incident, run, records.digest_of(records.read_record(plan_path, "plan")))
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("".join(n + "\n" for n in notes), encoding="utf-8")
    return f"latest: {run}"
