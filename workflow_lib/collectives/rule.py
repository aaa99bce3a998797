"""Rule entry: the `collectives` record of a snapshot, written before the diagnosis reads it."""

from __future__ import annotations

import os

from ..core import records


def collectives_snapshot_file(snapshot_path: str | os.PathLike, store_root: str | os.PathLike,
                              out_path: str | os.PathLike) -> dict:
    """Analyse the collectives of a snapshot's tables (read back from the store, verified); write the record."""
    from ..snapshot.build import load_tables
    from .analyze import analyze_collectives

    snap = records.read_record(snapshot_path, "snapshot")
    record = analyze_collectives([load_tables(snap, store_root)])
    records.write_record(out_path, record, "collectives")
    return record
