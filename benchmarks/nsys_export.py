"""Synthetic Nsight Systems SQLite exports, written from an incident's tables (the known-truth
tests) or from generated rows (benchmarks/nsys_import.py).

No machine here can write a real nsys report (the H200 wrote a .qdstrm but no report), so the
tests convert committed H200 CUPTI captures to the nsys schema with `write_export`: the tables
and columns `nsys export --type sqlite` writes (as in the two public exports under
tests/fixtures/nsys), in either of two layouts:
  "2024.5": META_DATA_EXPORT, ENUM_* tables, NVTX names through textId, no RUNTIME.name;
  "2022.2": EXPORT_META_DATA, no ENUM_* tables (numeric codes), NVTX names in text,
            RUNTIME.name beside nameId, and each call repeated as a backtrace row (eventClass 67).
Times are written as ns since the session start (TARGET_INFO_SESSION_START_TIME.utcEpochNs =
the incident's first time), so the import puts every row back at its original time.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa

GPID = 0x1000000 * 4242  # globalPid of the one process: PID 4242
_COPY = {"unknown": 0, "HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7, "DtoD": 8, "HtoH": 9, "PtoP": 10}
_MEM = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4}
_SYNC = {"UNKNOWN": 0, "EVENT_SYNCHRONIZE": 1, "STREAM_WAIT_EVENT": 2, "STREAM_SYNCHRONIZE": 3, "CONTEXT_SYNCHRONIZE": 4}

_SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,
  blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER{rt_name});
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, {green}streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, uuid TEXT,
  computeMajor INTEGER, computeMinor INTEGER, smCount INTEGER);
CREATE TABLE {meta} (name TEXT, value TEXT);
"""

_ENUMS = {
    "ENUM_CUDA_MEMCPY_OPER": [(v, f"CUDA_MEMCPY_KIND_{k.upper()}") for k, v in _COPY.items()],
    "ENUM_CUDA_MEM_KIND": [(v, f"CUDA_MEMOPR_MEMORY_KIND_{k.upper()}") for k, v in _MEM.items()] + [(7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN")],
    "ENUM_CUPTI_SYNC_TYPE": [(v, f"CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_{k}") for k, v in _SYNC.items()],
    "ENUM_NSYS_EVENT_CLASS": [(0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME"), (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER"),
                              (67, "TRACE_PROCESS_EVENT_CUDABACKTRACE")],
}


class _Strings:
    def __init__(self):
        self.ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        return self.ids.setdefault(s, len(self.ids) + 1)


def create(path: Path, version: str = "2024.5", page_size: int = 4096) -> sqlite3.Connection:
    """An empty export of `version`'s layout."""
    new = version != "2022.2"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA page_size = {int(page_size)}")
    db.executescript(_SCHEMA.format(green="greenContextId INTEGER, " if new else "", rt_name="" if new else ", name TEXT",
                                    meta="META_DATA_EXPORT" if new else "EXPORT_META_DATA"))
    meta = "META_DATA_EXPORT" if new else "EXPORT_META_DATA"
    db.executemany(f"INSERT INTO {meta} VALUES (?, ?)", [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
                                                         ("EXPORT_PRODUCT_VERSION", f"{version}.0 (synthetic)"),
                                                         ("EXPORT_SCHEMA_VERSION", "3.13.2" if new else "2.9.1")])
    if new:
        for t, rows in _ENUMS.items():
            db.execute(f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, name TEXT, label TEXT)")
            db.executemany(f"INSERT INTO {t} VALUES (?, ?, ?)", [(i, n, n) for i, n in rows])
    db.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H200 (synthetic)', '0000:00:00.0', 'GPU-synthetic', 9, 0, 132)")
    db.execute("INSERT INTO PROCESSES VALUES (?, ?, 'python')", (GPID, (GPID >> 24) & 0xFFFFFF))
    return db


def write_export(path: Path, tables: dict[str, pa.Table], version: str = "2024.5") -> Path:
    """An incident's kernels, memcpy, runtime_api, spans and steps (one process) as an nsys export.
    Steps become NVTX ranges `ProfilerStep#N` on their thread, as torch.profiler with
    emit_nvtx / nsys's PyTorch annotations write them; sync records (`cuda_sync:<TYPE>` rows)
    become CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows, which name no thread."""
    new = version != "2022.2"
    db = create(path, version)
    sid = _Strings()
    starts = [min(t["start_ns"].to_pylist()) for n, t in tables.items() if n in ("kernels", "memcpy", "runtime_api", "spans", "steps") and t.num_rows]
    t0 = min(starts)
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (t0,))
    k = tables["kernels"].to_pylist()
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, blockZ) VALUES (?,?,?,1,?,?,?,?,?,?,?,?,?,?,?)",
                   [(r["start_ns"] - t0, r["end_ns"] - t0, r["device"], r["stream"], r["correlation_id"], GPID, sid(r["name"]),
                     sid(r["name"].split("(")[0][-60:]), r["grid_x"] or 1, r["grid_y"] or 1, r["grid_z"] or 1,
                     r["block_x"] or 1, r["block_y"] or 1, r["block_z"] or 1) for r in k])
    m = tables["memcpy"].to_pylist()
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "bytes, copyKind, srcKind, dstKind) VALUES (?,?,?,1,?,?,?,?,?,?,?)",
                   [(r["start_ns"] - t0, r["end_ns"] - t0, r["device"], r["stream"], r["correlation_id"], GPID, r["bytes"] or 0,
                     _COPY.get(r["kind"], 0), _MEM.get(r["src_kind"], 7), _MEM.get(r["dst_kind"], 7)) for r in m if r["kind"] != "memset"])
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "value, bytes, memKind) VALUES (?,?,?,1,?,?,?,0,?,?)",
                   [(r["start_ns"] - t0, r["end_ns"] - t0, r["device"], r["stream"], r["correlation_id"], GPID, r["bytes"] or 0,
                     _MEM.get(r["dst_kind"], 7)) for r in m if r["kind"] == "memset"])
    big: dict[int, int] = {}

    def tid(t: int) -> int:
        """nsys keeps a thread id in globalTid's low 24 bits (Linux TIDs fit); a larger one (Kineto
        names some threads by a hash) gets a free id from the top of that range, the same one
        everywhere in the export."""
        return t if t < (1 << 24) else big.setdefault(t, (1 << 24) - 1 - len(big))

    calls, syncs = [], []
    for r in tables["runtime_api"].to_pylist():
        if r["name"].startswith("cuda_sync:"):
            syncs.append((r["start_ns"] - t0, r["end_ns"] - t0, 0, 1, 0, r["correlation_id"], GPID, _SYNC[r["name"].split(":", 1)[1]], 0))
            continue
        row = (r["start_ns"] - t0, r["end_ns"] - t0, 0, GPID + tid(r["thread_id"]), r["correlation_id"], sid(r["name"]), 0, None)
        calls.append(row if new else row + (None,))
        if not new:  # 2022.2 repeats each call as a CUDA backtrace row (eventClass 67), unversioned
            calls.append((row[0] - 1, row[1] + 1, 67, row[3], row[4], sid(r["name"].split("_v")[0]), 0, None, r["name"].split("_v")[0]))
    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({','.join('?' * (8 if new else 9))})", calls)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, streamId, correlationId, "
                   "globalPid, syncType, eventId) VALUES (?,?,?,?,?,?,?,?,?)", syncs)
    ranges = [(r["start_ns"] - t0, r["end_ns"] - t0, r["name"], r["thread_id"]) for r in tables["spans"].to_pylist()]
    named = {n for _, _, n, _ in ranges}  # a Kineto import keeps its ProfilerStep#N spans: not twice
    ranges += [(r["start_ns"] - t0, r["end_ns"] - t0, f"ProfilerStep#{r['step_id']}", r["thread_id"]) for r in tables["steps"].to_pylist()
               if f"ProfilerStep#{r['step_id']}" not in named]
    db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) VALUES (?,?,59,?,?,?)",
                   [(s, e, None if new else n, GPID + tid(t), sid(n) if new else None) for s, e, n, t in ranges])
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in sid.ids.items()])
    db.commit()
    db.close()
    return path
