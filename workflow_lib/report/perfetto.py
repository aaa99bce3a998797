"""Chrome/Perfetto trace JSON of an incident: opens in ui.perfetto.dev and chrome://tracing.

Layout (Chrome trace event format, ts/dur in microseconds from the first step's start):
  process "rank R host"   one thread track per host thread: steps, spans, CUDA API calls
  process "rank R GPU D"  one track per stream: kernels, memcpy/memset; NVML counters
  process "rank R diagnosis"  one track per check: each finding as a slice over its step,
                          named "<check>: <verdict> <explains>", evidence in args
Bulk rows are formatted by pandas' C JSON writer, not a Python loop per event. Written atomically.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..core import atomic
from ..core.incident import Incident
from ..diagnose import step_tables
from ..diagnose.stored import Diagnosis, as_diagnosis

_HOST, _GPU, _DIAG = 0, 100, 999  # pid offsets inside a rank's block of 1000


def _rank_of(t: pa.Table) -> np.ndarray:
    return pc.fill_null(t["rank"].cast(pa.int64()), 0).to_numpy() if t.num_rows else np.zeros(0, np.int64)


def _slices(t: pa.Table, origin_ns: int, *, name, cat: str, pid: np.ndarray, tid: np.ndarray) -> str:
    """X events for a table with start_ns/end_ns as a JSON fragment (no brackets)."""
    if t.num_rows == 0:
        return ""
    start = t["start_ns"].to_numpy() - origin_ns
    dur = t["end_ns"].to_numpy() - t["start_ns"].to_numpy()
    df = pd.DataFrame({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                       "ts": start / 1000.0, "dur": dur / 1000.0})
    return df.to_json(orient="records", double_precision=3)[1:-1]


def _counters(t: pa.Table, origin_ns: int) -> str:
    if t.num_rows == 0:
        return ""
    ts = (t["ts_ns"].to_numpy() - origin_ns) / 1000.0
    pid = _rank_of(t) * 1000 + _GPU + t["device"].to_numpy()
    metric = t["metric"].to_numpy(zero_copy_only=False)
    df = pd.DataFrame({"ph": "C", "name": metric, "pid": pid, "ts": ts,
                       "args": [{"value": v} for v in t["value"].to_pylist()]})
    return df.to_json(orient="records", double_precision=3)[1:-1]


def _metadata(inc: Incident) -> list[dict]:
    out, seen = [], set()
    for name, off in (("steps", _HOST), ("spans", _HOST), ("runtime_api", _HOST), ("kernels", _GPU), ("memcpy", _GPU), ("nvml", _GPU)):
        t = inc.table(name)
        if t.num_rows == 0:
            continue
        ranks = _rank_of(t)
        devs = t["device"].to_numpy() if "device" in t.column_names else np.zeros(t.num_rows, np.int64)
        for r, d in set(zip(ranks.tolist(), devs.tolist())):  # distinct (rank, device) pairs
            pid = r * 1000 + off + (d if off == _GPU else 0)
            if pid not in seen:
                seen.add(pid)
                label = f"rank {r} GPU {d}" if off == _GPU else f"rank {r} host"
                out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}})
    return out


def _findings(diagnosis: Diagnosis, origin_ns: int) -> list[dict]:
    """Each finding that applies as a slice over its step, from the tables' columns (one event
    per finding is the output; the step's columns are read once, not per finding)."""
    out = []
    checks = diagnosis.record["checks"]  # required in every version of the record
    st, f = diagnosis.steps_table, diagnosis.findings_table
    verdict = step_tables.dict_codes(f["verdict"])
    rows = np.flatnonzero(~step_tables.is_value(verdict, "not_applicable"))
    f = f.take(pa.array(rows, pa.int64()))
    rank = st["rank"].fill_null(0).to_numpy()
    start, wall, step_id = st["start_ns"].to_numpy(), st["wall_ns"].to_numpy(), st["step_id"].to_pylist()
    cols = {name: f[name].cast(pa.string()).to_pylist() if pa.types.is_dictionary(f[name].type) else f[name].to_pylist()
            for name in ("step_row", "check", "verdict", "explains_ns", "missing_json", "evidence_json")}
    for i, check, verdict, explains, missing, evidence in zip(*cols.values()):
        tid = checks.index(check) + 1 if check in checks else 0
        label = f"{check}: {verdict}" + (f" {explains / 1e6:.3f} ms" if explains else "")
        out.append({"ph": "X", "cat": "finding", "name": label, "pid": int(rank[i]) * 1000 + _DIAG, "tid": tid,
                    "ts": round((int(start[i]) - origin_ns) / 1000.0, 3), "dur": round(int(wall[i]) / 1000.0, 3),
                    "args": {"step_id": step_id[i], "explains_ns": explains, "missing": json.loads(missing),
                             "evidence": json.loads(evidence) if evidence is not None else step_tables.NOT_KEPT}})
    for r in sorted(set(rank.tolist())):
        out.append({"ph": "M", "name": "process_name", "pid": r * 1000 + _DIAG, "tid": 0, "args": {"name": f"rank {r} diagnosis"}})
        for i, c in enumerate(checks, 1):
            out.append({"ph": "M", "name": "thread_name", "pid": r * 1000 + _DIAG, "tid": i, "args": {"name": c}})
    return out


def export_perfetto(incident: Incident, diagnosis: Diagnosis | dict | None, out_path: str | os.PathLike) -> str:
    """Write the incident (and the diagnosis's findings, if given) as Chrome trace JSON."""
    steps = incident.table("steps")
    starts = [pc.min(t["start_ns"]).as_py() for n, t in incident.tables.items() if "start_ns" in t.column_names and t.num_rows]
    origin = int(pc.min(steps["start_ns"]).as_py()) if steps.num_rows else int(min(starts) if starts else 0)
    parts = []
    t = steps
    if t.num_rows:
        parts.append(_slices(t, origin, name=pc.binary_join_element_wise("step ", t["step_id"].cast(pa.string()), "").to_numpy(zero_copy_only=False),
                             cat="step", pid=_rank_of(t) * 1000 + _HOST, tid=t["thread_id"].to_numpy()))
    for name, cat in (("spans", "span"), ("runtime_api", "cuda_api")):
        t = incident.table(name)
        parts.append(_slices(t, origin, name=t["name"].to_numpy(zero_copy_only=False) if t.num_rows else [], cat=cat,
                             pid=_rank_of(t) * 1000 + _HOST, tid=t["thread_id"].to_numpy() if t.num_rows else []))
    t = incident.table("kernels")
    parts.append(_slices(t, origin, name=t["name"].to_numpy(zero_copy_only=False) if t.num_rows else [], cat="kernel",
                         pid=_rank_of(t) * 1000 + _GPU + (t["device"].to_numpy() if t.num_rows else 0),
                         tid=t["stream"].to_numpy() if t.num_rows else []))
    t = incident.table("memcpy")
    parts.append(_slices(t, origin, name=t["kind"].to_numpy(zero_copy_only=False) if t.num_rows else [], cat="memcpy",
                         pid=_rank_of(t) * 1000 + _GPU + (t["device"].to_numpy() if t.num_rows else 0),
                         tid=t["stream"].to_numpy() if t.num_rows else []))
    parts.append(_counters(incident.table("nvml"), origin))
    small = _metadata(incident) + (_findings(as_diagnosis(diagnosis), origin) if diagnosis is not None else [])
    parts.extend(json.dumps(e, separators=(",", ":")) for e in small)
    body = ",\n".join(p for p in parts if p)
    manifest = incident.typed_manifest
    meta = {"displayTimeUnit": "ns", "otherData": {"incident_id": manifest.incident_id,
                                                   "origin_ns": origin, "clock": manifest.clock}}
    head = json.dumps(meta)[:-1]
    atomic.write_text(out_path, head + ',"traceEvents":[\n' + body + "\n]}\n")
    return str(out_path)
