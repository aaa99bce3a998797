"""The `diagnose` rule's entry (rules/diagnose.smk): a snapshot's tables, read back from the
store and verified, diagnosed with the `collectives` rule's record when given, written as the
diagnosis record and its tables."""

from __future__ import annotations

import os

from ..core import records
from ..snapshot.build import load_tables
from .files import written
from .types import DiagnoseOptions


def run(snapshot_path: str | os.PathLike, store_root: str | os.PathLike, out_path: str | os.PathLike,
                           *, options: DiagnoseOptions | None = None, settings: dict | None = None,
                           collectives_path: str | os.PathLike | None = None) -> dict:
    """Rule entry: diagnose a snapshot record's tables (read back from the store, verified),
    with the `collectives` rule's record when given (not re-analysed here). `settings` is the
    workflow's `diagnose:` config section (schema-checked by the workflow)."""
    if options is None and settings:
        options = DiagnoseOptions.from_config(settings)
    snap = records.read_record(snapshot_path, "snapshot")
    inc = load_tables(snap, store_root)
    # upgraded (records.upgrade refuses a version 1 record: re-run the collectives rule), so the
    # diagnosis reads the fields version 2 requires (hung_on, culprits) directly
    coll = (records.upgrade("collectives", records.read_record(collectives_path, "collectives"), where=collectives_path)
            if collectives_path is not None else None)
    return written(inc, out_path, incident_id=snap["incident_id"], snapshot_digest=records.digest_of(snap), options=options,
                    collectives=coll)
