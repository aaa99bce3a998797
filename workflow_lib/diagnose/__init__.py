"""Diagnosis: per-step measures kept apart (wall, kernel sum, GPU busy, idle gaps, host API
time) and checks that attribute a delay only with the evidence the attribution needs.

In: an incident (its tables, core/incident.py), DiagnoseOptions, and the `collectives`
stage's record when there is one. Out: the diagnosis record (schemas/diagnosis.schema.json,
types.DiagnosisRecord) with its two per-step Parquet tables beside it (step_tables.py).

    rule.run(snapshot_path, store_root, out_path, settings=..., collectives_path=...)  the rule's entry
    diagnose(incident, incident_id=..., snapshot_digest=..., options=...) -> record  (engine.py)
    diagnose_dir(incident_dir, options=...) -> record; diagnose_to_file(incident_dir, out_path)  (files.py)
    load_diagnosis(path) -> Diagnosis  (stored.py: the record and its per-step tables)

Where things are: engine.py runs the ranks; columns.py all checks over all steps of a rank
(batch.py the interval algebra, credit.py the credit rule); checks/ one module per check
(its column rule `check_steps` and its evidence `describe`); describe.py the evidence of the
steps kept in detail; claims.py the collectives analysis' findings; record.py the record.
"""

from __future__ import annotations

from .checks import NAMES
from .engine import diagnose
from .files import diagnose_dir, diagnose_to_file
from .rule import run as diagnose_snapshot_file  # rules/diagnose.smk's name for rule.run
from .stored import Diagnosis, as_diagnosis, load_diagnosis, table_paths, write_diagnosis
from .types import DiagnoseOptions

__all__ = ["diagnose", "diagnose_dir", "diagnose_to_file", "DiagnoseOptions", "NAMES", "Diagnosis", "load_diagnosis",
           "as_diagnosis", "write_diagnosis", "table_paths"]
