"""Diagnose an incident read from disk, and write the diagnosis (record and tables).

    diagnose_dir(incident_dir, options=..., out_path=None) -> record  (steps inline)
    diagnose_to_file(incident_dir, out_path, options=...) -> record written (memory of one rank; spool.py)
    written(incident, out_path, **diagnose's keywords) -> record written
"""

from __future__ import annotations

import os

from ..core.incident_stream import read_incident_by_rank
from ..snapshot import build as snapshot_build
from .engine import diagnose
from .spool import StepSpool, write_spooled
from .stored import write_diagnosis
from .types import DiagnoseOptions


def diagnose_dir(incident_dir: str | os.PathLike, *, options: DiagnoseOptions | None = None,
                 out_path: str | os.PathLike | None = None) -> dict:
    """Read an incident directory, diagnose it, and (if out_path) write the record and its
    tables atomically (stored.write_diagnosis). Returns the record with its steps inline."""
    inc = read_incident_by_rank(incident_dir)  # rank by rank: memory follows one rank's rows
    record = diagnose(inc, incident_id=inc.manifest["incident_id"], snapshot_digest=snapshot_build.snapshot_digest(incident_dir, inc.manifest), options=options,
                      validate=out_path is None)
    if out_path is not None:
        write_diagnosis(out_path, record)
    return record


def diagnose_to_file(incident_dir: str | os.PathLike, out_path: str | os.PathLike, *,
                     options: DiagnoseOptions | None = None) -> dict:
    """diagnose_dir(out_path=...) in memory bounded by one rank: the incident's tables are read
    rank by rank and the steps go to the diagnosis' tables as each rank is done (spool.py).
    The files are the same; returns the record written (its steps are in the tables)."""
    inc = read_incident_by_rank(incident_dir)
    return written(inc, out_path, incident_id=inc.manifest["incident_id"],
                    snapshot_digest=snapshot_build.snapshot_digest(incident_dir, inc.manifest), options=options)


def written(inc, out_path, **kw) -> dict:
    """diagnose() into its files: each rank's steps to the tables as the rank is done (spool.py),
    the record last, validated once. Returns the record written."""
    with StepSpool(out_path) as spool:
        record = diagnose(inc, **kw, validate=False, spool=spool)
        if "steps" in record:  # dump-only: the record was built without the spool
            return write_diagnosis(out_path, record)
        return write_spooled(out_path, record, spool)
