"""The report's records read together, the page built from them, and the files written.

    write_report_files(snapshot, diagnosis, plan, comparison, store_root, out_path)  # rule.run, `stallcase show --html`
    build_report(...) -> str                                                          # the page
    load_records(snapshot, diagnosis=None, plan=None, comparison=None) -> Records     # for `stallcase show`

preflight/<block>.json and execution/<block>.json are read from the directory holding
plan.json (results/<incident>/). The snapshot's tables are read back from the store
(digest-verified) for the timeline.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..compare.types import Comparison
from ..core import atomic, typed
from ..core.errors import StallcaseError
from ..diagnose.stored import as_diagnosis, load_diagnosis
from ..plan.schedule import is_block_id
from ..plan.types import Plan
from ..preflight.types import Preflight
from ..snapshot.types import Snapshot
from ..trials.types import Execution
from . import html, model, timeline
from .model import Records

PERFETTO_NAME = "trace.perfetto.json"
"""The incident's Perfetto (Chrome trace JSON) export, written next to the report and linked from it."""


def _optional(path, read):
    """read(path), or None when the stage has not written it yet."""
    if path is None or not Path(path).is_file():
        return None
    return read(path)


def _reader(cls):
    """path -> the record as its typed class (validated, older versions upgraded: core/records.py's upgrade)."""
    return lambda path: typed.read(path, cls)


def _as_dict(cls):
    """path -> the record read as its typed class, handed on as JSON (for the parts of the report
    that still take a kind's dict; the read, its check and its upgrade are the typed ones)."""
    return lambda path: typed.read(path, cls).to_json()


def _per_block(directory: Path, read) -> dict:
    """block -> read(path) for each execution/<block>.json (or preflight/) beside plan.json."""
    return {p.stem: read(p) for p in sorted(directory.glob("*.json")) if is_block_id(p.stem)}


def load_records(snapshot_path, diagnosis_path=None, plan_path=None, comparison_path=None) -> Records:
    """Read the records (validated; the diagnosis with its tables); preflight/ and execution/ sit next to plan.json."""
    snapshot = _as_dict(Snapshot)(snapshot_path)
    base = Path(plan_path).parent if plan_path is not None else Path(snapshot_path).parent
    return Records(
        snapshot=snapshot,
        diagnosis=_optional(diagnosis_path, load_diagnosis),
        plan=_optional(plan_path, _reader(Plan)),
        preflights=_per_block(base / "preflight", _as_dict(Preflight)),
        executions=_per_block(base / "execution", _reader(Execution)),
        comparison=_optional(comparison_path, _reader(Comparison)),
    )


def _tables(snapshot: dict, store_root):
    from ..snapshot.build import load_tables

    return load_tables(snapshot, store_root)


def _page(recs: Records, incident, perfetto_href: str | None, raw_events: int) -> str:
    if recs.diagnosis is not None:  # a record with its steps inline: its tables built once, here
        recs = dataclasses.replace(recs, diagnosis=as_diagnosis(recs.diagnosis))
    tl = timeline.build(incident, recs.diagnosis, raw_total=raw_events)
    return html.page(model.build(recs, tl, perfetto_href=perfetto_href))


def build_report(recs: Records, store_root: str | os.PathLike, *, perfetto_href: str | None = None,
                 raw_events: int = timeline.RAW_TOTAL_BUDGET) -> str:
    """The page for these records (the snapshot's tables are read from the store at store_root).

    raw_events: how many timeline events may be inlined exactly; the rest are drawn decimated.
    """
    return _page(recs, _tables(recs.snapshot, store_root), perfetto_href, raw_events)


def write_report_files(snapshot_path, diagnosis_path, plan_path, comparison_path, store_root, out_path,
                       *, perfetto: bool = True) -> Path:
    """Rule entry: read the records, write the page atomically to out_path and (perfetto=True) the
    incident's Perfetto trace next to it as trace.perfetto.json, linked from the page."""
    recs = load_records(snapshot_path, diagnosis_path, plan_path, comparison_path)
    diag_id = recs.diagnosis.record["incident_id"] if recs.diagnosis is not None else None
    if recs.diagnosis is not None and diag_id != recs.snapshot["incident_id"]:
        raise StallcaseError(diagnosis_path, f"diagnosis is of incident {diag_id!r}, "
                                             f"the snapshot of {recs.snapshot['incident_id']!r}")
    incident = _tables(recs.snapshot, store_root)
    trace = Path(out_path).parent / PERFETTO_NAME
    if perfetto:
        from .perfetto import export_perfetto

        export_perfetto(incident, recs.diagnosis, trace)
    href = PERFETTO_NAME if trace.is_file() else None
    return atomic.write_text(out_path, _page(recs, incident, href, timeline.RAW_TOTAL_BUDGET))
