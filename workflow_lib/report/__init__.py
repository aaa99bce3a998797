"""Report stage: one self-contained HTML page per incident, and a plain-text summary.

    write_report_files(snapshot, diagnosis, plan, comparison, store_root, out_path)  # the rule
    build_report(...) -> str                                                          # the page
    load_records(results_dir) -> Records                                              # for `stallcase show`

preflight/<block>.json and execution/<block>.json are read from the directory holding
plan.json (results/<incident>/). The snapshot's tables are read back from the store
(digest-verified) for the timeline.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import atomic, records
from ..errors import StallcaseError
from . import html, model, text, timeline
from .model import Records

__all__ = ["write_report_files", "build_report", "load_records", "summary_text", "Records"]

PERFETTO_NAMES = ("trace.perfetto.json.gz", "trace.perfetto.json")
"""Where a Perfetto export of the incident is looked for, next to the report."""


def _optional(path, kind: str) -> dict | None:
    if path is None or not Path(path).is_file():
        return None
    return records.read_record(path, kind)


def _per_block(directory: Path, kind: str) -> dict[str, dict]:
    out = {}
    for p in sorted(directory.glob("b*.json")):
        out[p.stem] = records.read_record(p, kind)
    return out


def load_records(snapshot_path, diagnosis_path=None, plan_path=None, comparison_path=None) -> Records:
    """Read the records (validated); preflight/ and execution/ sit next to plan.json."""
    snapshot = records.read_record(snapshot_path, "snapshot")
    base = Path(plan_path).parent if plan_path is not None else Path(snapshot_path).parent
    return Records(
        snapshot=snapshot,
        diagnosis=_optional(diagnosis_path, "diagnosis"),
        plan=_optional(plan_path, "plan"),
        preflights=_per_block(base / "preflight", "preflight"),
        executions=_per_block(base / "execution", "execution"),
        comparison=_optional(comparison_path, "comparison"),
    )


def _timeline(snapshot: dict, diagnosis: dict | None, store_root, raw_events: int) -> dict:
    from ..snapshot import load_tables

    return timeline.build(load_tables(snapshot, store_root), diagnosis, raw_total=raw_events)


def _perfetto_href(out_path) -> str | None:
    for name in PERFETTO_NAMES:
        if (Path(out_path).parent / name).is_file():
            return name
    return None


def build_report(recs: Records, store_root: str | os.PathLike, *, perfetto_href: str | None = None,
                 raw_events: int = timeline.RAW_TOTAL_BUDGET) -> str:
    """The page for these records (the snapshot's tables are read from the store at store_root).

    raw_events: how many timeline events may be inlined exactly; the rest are drawn decimated.
    """
    tl = _timeline(recs.snapshot, recs.diagnosis, store_root, raw_events)
    return html.page(model.build(recs, tl, perfetto_href=perfetto_href))


def summary_text(recs: Records) -> str:
    """The plain-text summary for terminals (no timeline: it needs no tables)."""
    return text.render(model.build(recs, None))


def write_report_files(snapshot_path, diagnosis_path, plan_path, comparison_path, store_root, out_path) -> Path:
    """Rule entry: read the records, build the page, write it atomically to out_path."""
    recs = load_records(snapshot_path, diagnosis_path, plan_path, comparison_path)
    if recs.diagnosis is not None and recs.diagnosis["incident_id"] != recs.snapshot["incident_id"]:
        raise StallcaseError(diagnosis_path, f"diagnosis is of incident {recs.diagnosis['incident_id']!r}, "
                                             f"the snapshot of {recs.snapshot['incident_id']!r}")
    page = build_report(recs, store_root, perfetto_href=_perfetto_href(out_path))
    return atomic.write_text(out_path, page)
