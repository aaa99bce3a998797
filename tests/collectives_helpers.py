"""Incidents for the collectives tests: FR dumps imported, optionally into a prepared incident."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from benchmarks.fr_builders import write_dumps
from workflow_lib.core import records
from workflow_lib.collectives import analyze_collectives, collective_wait_findings
from workflow_lib.collectives.types import Options
from workflow_lib.importers.torch_fr import import_torch_fr
from workflow_lib.core.incident import Incident, read_incident, source, write_incident


def make_incident(root: Path, name: str, dumps: dict[int, dict], *, hostname: str | None = None,
                  tables: dict[str, pa.Table] | None = None, fmt: str = "pickle") -> Incident:
    """Import `dumps` into incident `name`; with a hostname or tables, prepare the incident first."""
    inc_root = root / "incidents"
    if hostname is not None or tables:
        manifest = {"incident_id": name, "reason": "manual", "producer": "test",
                    "clock": {"host": "realtime", "unix_minus_host_ns": 0}, "sources": {"test": source("observed")}}
        if hostname is not None:
            manifest["provenance"] = {"hostname": hostname}
        write_incident(inc_root / name, manifest, tables or {})
    files = write_dumps(root / "dumps" / name, dumps, fmt=fmt) if dumps else []
    if files:
        import_torch_fr(files, incident_id=name, incidents_dir=inc_root)
    return read_incident(inc_root / name)


def analyze(incidents: list[Incident], **opts) -> dict:
    """Analyse and check the record against schemas/collectives.schema.json, in every test."""
    record = analyze_collectives(incidents, Options(**opts))
    records.validate(record, "collectives")
    return record


def findings_by(analysis: dict, steps: dict) -> dict[tuple[int, int], dict]:
    return {(f["rank"], f["step_id"]): f for f in collective_wait_findings(analysis, steps)}


def ops_of(analysis: dict, pg: str = "0") -> dict[int, dict]:
    return {op["seq_id"]: op for op in analysis["ops"] if op["pg_id"] == pg and op["sub"] == 0}


def clock_sync(offset_ns: int, uncertainty_ns: int, name: str = "rank0") -> pa.Table:
    return pa.table({"source": [f"ref_clock:{name}"], "ts_host_ns": [1], "offset_ns": [offset_ns],
                     "uncertainty_ns": [uncertainty_ns], "rank": pa.array([None], pa.int32())})
