"""Rule entry: the `collectives` record of a snapshot, written before the diagnosis reads it."""

from __future__ import annotations

import os

from ..core import records, typed
from ..snapshot.types import Snapshot


def run(snapshot_path: str | os.PathLike, store_root: str | os.PathLike, out_path: str | os.PathLike) -> dict:
    """Analyse the collectives of a snapshot's tables (read back from the store, verified); write the record."""
    from ..snapshot.build import load_tables  # deferred: the analysis needs pandas (see __init__)
    from .analyze import analyze_collectives

    snap = typed.read(snapshot_path, Snapshot)
    record = analyze_collectives([load_tables(snap.to_json(), store_root)])
    records.write_record(out_path, record, "collectives")
    return record
