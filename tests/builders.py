"""Builders for synthetic incidents with known answers (the analyzer's create_one_event() habit).

    inc = make_incident(steps=[step(0, 0, 1_000_000)], kernels=[kernel(10, 500_000)], ...)

Rows are dicts with the contract columns of workflow_lib.core.tables; omitted nullable columns are
null. A table passed (even empty) is an observed source; a table not passed is not_observed,
unless `observed` overrides. `write_to` writes the incident directory and reads it back, so
the on-disk path is exercised too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from workflow_lib.core import tables
from workflow_lib.core.incident import Incident, read_incident, source, write_incident

SOURCES = ("kernels", "memcpy", "runtime_api", "spans", "sched", "nvml", "clock_sync", "collectives")
DETAIL_TABLES = ("span_details",)  # tables that are not sources of their own (the spans' attributes)


def step(step_id: int, start_ns: int, end_ns: int, *, thread_id: int = 1, rank: int | None = None) -> dict:
    return {"step_id": step_id, "thread_id": thread_id, "start_ns": start_ns, "end_ns": end_ns, "rank": rank}


def kernel(start_ns: int, end_ns: int, *, name: str = "gemm", stream: int = 7, device: int = 0,
           corr: int | None = None, rank: int | None = None) -> dict:
    return {"name": name, "device": device, "stream": stream, "correlation_id": corr, "start_ns": start_ns,
            "end_ns": end_ns, "rank": rank}


def memcpy(start_ns: int, end_ns: int, *, kind: str = "HtoD", stream: int = 7, device: int = 0,
           corr: int | None = None, nbytes: int | None = None, rank: int | None = None, src_kind: str | None = None,
           dst_kind: str | None = None, is_async: bool | None = None) -> dict:
    return {"kind": kind, "device": device, "stream": stream, "bytes": nbytes, "correlation_id": corr,
            "start_ns": start_ns, "end_ns": end_ns, "rank": rank, "src_kind": src_kind, "dst_kind": dst_kind,
            "is_async": is_async}


def api(start_ns: int, end_ns: int, *, name: str = "cudaLaunchKernel", thread_id: int = 1, corr: int | None = None,
        is_sync: bool = False, rank: int | None = None) -> dict:
    return {"name": name, "thread_id": thread_id, "correlation_id": corr, "start_ns": start_ns, "end_ns": end_ns,
            "is_sync": is_sync, "rank": rank}


def span(name: str, start_ns: int, end_ns: int, *, thread_id: int = 1, depth: int = 0, rank: int | None = None) -> dict:
    return {"name": name, "thread_id": thread_id, "depth": depth, "start_ns": start_ns, "end_ns": end_ns, "rank": rank}


def sched(ts_ns: int, *, thread_id: int = 1, state: str = "R", cpu_time_ns: int | None = None,
          runqueue_wait_ns: int | None = None, rank: int | None = None) -> dict:
    return {"ts_ns": ts_ns, "thread_id": thread_id, "thread_name": "main", "state": state, "cpu_time_ns": cpu_time_ns,
            "runqueue_wait_ns": runqueue_wait_ns, "timeslices": None, "rank": rank}


def detail(name: str, start_ns: int, end_ns: int, *, thread_id: int = 1, generation: int | None = None,
           objects: int | None = None, nbytes: int | None = None, rank: int | None = None) -> dict:
    """A span_details row: the attributes of the span (name, thread_id, start_ns) of `spans`."""
    return {"name": name, "thread_id": thread_id, "start_ns": start_ns, "end_ns": end_ns, "generation": generation,
            "objects": objects, "uncollectable": 0 if objects is not None else None, "bytes": nbytes, "rank": rank}


def nvml(ts_ns: int, metric: str, value: float, *, device: int = 0, rank: int | None = None) -> dict:
    return {"device": device, "ts_ns": ts_ns, "metric": metric, "value": float(value), "source": "poll", "rank": rank}


def clock(ts_host_ns: int, uncertainty_ns: int, *, offset_ns: int = 0, rank: int | None = None) -> dict:
    return {"source": "cupti", "ts_host_ns": ts_host_ns, "offset_ns": offset_ns, "uncertainty_ns": uncertainty_ns, "rank": rank}


def table(name: str, rows: list[dict]) -> pa.Table:
    schema = tables.TABLES[name]
    cols = {f.name: pa.array([r.get(f.name) for r in rows], type=f.type) for f in schema}
    return tables.conform(name, pa.table(cols, schema=schema))


def make_incident(*, steps: list[dict], producer: str = "synthetic", incident_id: str = "synthetic",
                  observed: dict[str, bool] | None = None, write_to: str | os.PathLike | None = None,
                  **rows: list[dict]) -> Incident:
    """An Incident from row lists: make_incident(steps=[...], kernels=[...], runtime_api=[...], ...)."""
    unknown = set(rows) - set(SOURCES) - set(DETAIL_TABLES)
    if unknown:
        raise TypeError(f"unknown table(s) {sorted(unknown)}")
    data = {"steps": table("steps", steps)}
    for name, r in rows.items():
        data[name] = table(name, r)
    obs = {name: name in rows for name in SOURCES}
    obs.update(observed or {})
    manifest = {
        "incident_id": incident_id, "reason": "manual", "producer": producer,
        "clock": {"host": "monotonic", "unix_minus_host_ns": None},
        "sources": {n: source("observed") if o else source("not_observed", "not in this synthetic case") for n, o in obs.items()},
    }
    if write_to is not None:
        write_incident(write_to, manifest, data)
        return read_incident(write_to)
    full = dict(manifest, tables={}, schema_version=1, kind="incident_manifest", tables_version=tables.TABLES_VERSION,
                created_unix_ns=0)
    return Incident(path=Path(write_to or "<synthetic>"), manifest=full, tables=data)
