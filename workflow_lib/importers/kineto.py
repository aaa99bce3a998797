"""`stallcase import kineto`: PyTorch profiler (Kineto) traces -> an incident directory.

One trace file per rank (rank = distributedInfo.rank when present, else the file's position).
Times: Kineto `ts`/`dur` are microseconds; absolute ns = baseTimeNanoseconds + ts*1000 when the
trace has baseTimeNanoseconds (it then matches time.time_ns() in the workload), else ts is
already Unix microseconds (older Kineto). The host timeline is therefore "realtime".
GPU and host times share CUPTI's corrected timebase, so no clock_sync rows exist; the
diagnosis treats that as one timebase (see diagnose/checks/host_submission.py).

Kineto has no scheduler samples, no NVML and no per-collective sequence numbers: those sources
are written as not_observed with the reason. NCCL kernels land in `kernels` like any kernel.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cas import hash_file
from ..errors import InputError, StallcaseError
from ..incident import MANIFEST, incident_dir, source, write_incident
from . import kineto_events as ke
from .json_stream import read_trace

DEFAULT_STEP_PATTERN = r"ProfilerStep#(\d+)"

# Calls that block the calling host thread until the GPU (or a stream/event) catches up.
# cudaMemcpy (not Async) synchronizes with the device; .item() appears as cudaMemcpyAsync
# followed by cudaStreamSynchronize, which the second name catches.
SYNC_RE = re.compile(
    r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaThreadSynchronize"
    r"|cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|cudaMemcpyFromSymbol|cudaMemcpyToSymbol|cudaMemcpyPeer"
    r"|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize|cuMemcpy|cuMemcpy_v2"
    r"|cuMemcpyDtoH|cuMemcpyDtoH_v2|cuMemcpyHtoD|cuMemcpyHtoD_v2|cuMemcpyDtoD|cuMemcpyDtoD_v2)$"
)
_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")


def _read_one(path: Path) -> tuple[pa.StructArray, dict]:
    chunks: list[pa.StructArray] = []
    meta = read_trace(path, chunks.append, parse=ke.parse_piece)
    arr = pa.concat_arrays(chunks) if chunks else pa.array([], type=ke.EVENT)
    return arr, meta


def _names_matching(names: pa.Array, rx: re.Pattern) -> np.ndarray:
    """rx.search per distinct name, broadcast to events (names repeat thousands of times)."""
    enc = pc.dictionary_encode(names).combine_chunks() if isinstance(names, pa.ChunkedArray) else pc.dictionary_encode(names)
    hits = np.array([bool(rx.search(n)) for n in enc.dictionary.to_pylist()], bool)
    return hits[enc.indices.to_numpy(zero_copy_only=False)] if len(enc.dictionary) else np.zeros(len(names), bool)


def _depths(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of host spans per thread. For properly nested spans sorted by (start,
    -end), depth = spans earlier in that order that have not ended by this span's start."""
    depth = np.zeros(start.size, np.int64)
    order = np.lexsort((-end, start, tid))
    t_sorted = tid[order]
    bounds = np.flatnonzero(np.diff(t_sorted)) + 1
    for lo, hi in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [order.size]])):  # threads are few
        idx = order[lo:hi]
        s, e = start[idx], end[idx]
        ended = np.searchsorted(np.sort(e), s, side="right")
        depth[idx] = np.maximum(np.arange(idx.size) - ended, 0)
    return depth


def _rank_of(meta: dict, position: int, path: Path) -> int:
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and "rank" in info:
        r = info["rank"]
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise InputError(path, f"distributedInfo.rank is not a non-negative integer: {r!r}")
        return r
    return position


def _times(arr: pa.StructArray, base_ns: int, shift_us: float) -> tuple[np.ndarray, np.ndarray]:
    ts = arr.field("ts").to_numpy(zero_copy_only=False)
    dur = pc.fill_null(arr.field("dur"), 0.0).to_numpy(zero_copy_only=False)
    start = base_ns + np.rint((ts - shift_us) * 1000.0).astype(np.int64)
    return start, start + np.rint(np.maximum(dur, 0.0) * 1000.0).astype(np.int64)


def _tables_for(arr: pa.StructArray, rank: int, base_ns: int, shift_us: float, step_rx: re.Pattern) -> dict[str, pa.Table]:
    cat = pc.utf8_lower(arr.field("cat"))
    start, end = _times(arr, base_ns, shift_us)
    args = arr.field("args")
    out: dict[str, pa.Table] = {}

    def part(cats):
        mask = pc.fill_null(pc.is_in(cat, pa.array(cats)), False).to_numpy(zero_copy_only=False)
        return mask

    def col(name, mask):
        return arr.field(name).filter(pa.array(mask))

    def arg(name, mask):
        return args.field(name).filter(pa.array(mask))

    def dim(name, mask, i):
        lists = arg(name, mask)
        ok = pc.fill_null(pc.greater(pc.list_value_length(lists), i), False)
        vals = pc.list_element(pc.if_else(ok, lists, pa.scalar([0, 0, 0], pa.list_(pa.int64()))), i)
        return pc.if_else(ok, vals, pa.scalar(None, pa.int64()))

    rank_col = lambda n: pa.array(np.full(n, rank, np.int32))  # noqa: E731

    m = part(ke.KERNEL)
    n = int(m.sum())
    out["kernels"] = pa.table({
        "name": col("name", m), "device": pc.coalesce(arg("device", m), col("pid", m), 0),
        "stream": pc.coalesce(arg("stream", m), col("tid", m), 0), "correlation_id": arg("correlation", m),
        "start_ns": start[m], "end_ns": end[m],
        "grid_x": dim("grid", m, 0), "grid_y": dim("grid", m, 1), "grid_z": dim("grid", m, 2),
        "block_x": dim("block", m, 0), "block_y": dim("block", m, 1), "block_z": dim("block", m, 2),
        "rank": rank_col(n),
    })

    m = part(ke.MEMCPY + ke.MEMSET)
    n = int(m.sum())
    names = col("name", m)
    is_set = part(ke.MEMSET)[m]
    kinds = pc.dictionary_encode(names)
    kind_of = [(mm.group(1) if (mm := _COPY_KIND.search(s)) else "unknown") for s in kinds.dictionary.to_pylist()]
    kind = np.asarray(kind_of, object)[kinds.indices.to_numpy(zero_copy_only=False)] if n else np.zeros(0, object)
    kind = np.where(is_set, "memset", kind)
    out["memcpy"] = pa.table({
        "kind": pa.array(kind.tolist(), pa.string()), "device": pc.coalesce(arg("device", m), col("pid", m), 0),
        "stream": pc.coalesce(arg("stream", m), col("tid", m), 0), "bytes": arg("bytes", m),
        "correlation_id": arg("correlation", m), "start_ns": start[m], "end_ns": end[m], "rank": rank_col(n),
    })

    m = part(ke.RUNTIME)
    n = int(m.sum())
    names = col("name", m)
    out["runtime_api"] = pa.table({
        "name": names, "thread_id": pc.coalesce(col("tid", m), 0), "correlation_id": arg("correlation", m),
        "start_ns": start[m], "end_ns": end[m], "is_sync": pa.array(_names_matching(names, SYNC_RE) if n else np.zeros(0, bool)),
        "rank": rank_col(n),
    })

    m = part(ke.HOST)
    n = int(m.sum())
    tid = pc.fill_null(col("tid", m), 0).to_numpy(zero_copy_only=False)
    names = col("name", m)
    depth = _depths(tid, start[m], end[m]) if n else np.zeros(0, np.int64)
    out["spans"] = pa.table({"name": names, "thread_id": tid, "depth": depth.astype(np.int32),
                             "start_ns": start[m], "end_ns": end[m], "rank": rank_col(n)})
    out["steps"] = _steps(out["spans"], step_rx)
    return out


def _steps(spans: pa.Table, rx: re.Pattern) -> pa.Table:
    names = spans["name"]
    enc = pc.dictionary_encode(names).combine_chunks() if isinstance(names, pa.ChunkedArray) else pc.dictionary_encode(names)
    ids = []
    for n in enc.dictionary.to_pylist():  # distinct names only
        mm = rx.search(n)
        ids.append(int(mm.group(1)) if mm and mm.group(1) and mm.group(1).isdigit() else -1)
    sid = np.asarray(ids, np.int64)[enc.indices.to_numpy(zero_copy_only=False)] if len(enc.dictionary) else np.zeros(0, np.int64)
    keep = sid >= 0
    t = spans.filter(pa.array(keep)).append_column("step_id", pa.array(sid[keep]))
    # Keep the outermost, earliest span per step id (a step name can repeat on nested spans).
    t = t.sort_by([("step_id", "ascending"), ("depth", "ascending"), ("start_ns", "ascending")])
    s = t["step_id"].to_numpy()
    first = np.ones(s.size, bool)
    first[1:] = s[1:] != s[:-1]
    t = t.filter(pa.array(first))
    return pa.table({"step_id": t["step_id"], "thread_id": t["thread_id"], "start_ns": t["start_ns"],
                     "end_ns": t["end_ns"], "rank": t["rank"]})


def _base(meta: dict, arr: pa.StructArray, path: Path) -> tuple[int, float, bool]:
    """(base_ns, shift_us, unix_known): absolute ns = base_ns + (ts - shift_us) * 1000."""
    b = meta.get("baseTimeNanoseconds")
    if b is not None:
        if not isinstance(b, int) or isinstance(b, bool) or b < 0:
            raise InputError(path, f"baseTimeNanoseconds is not a non-negative integer: {b!r}")
        return b, 0.0, True
    ts_min = pc.min(arr.field("ts")).as_py() if len(arr) else 0.0
    shift = float(np.floor(ts_min or 0.0))
    # Older Kineto wrote Unix microseconds directly (> year 2001 in us); anything else is relative.
    return int(shift) * 1000, shift, shift > 1e15


def import_kineto(files, *, incident_id: str, incidents_dir: str | os.PathLike = "incidents",
                  step_pattern: str | None = None) -> Path:
    """Import Kineto trace files (one per rank) into `<incidents_dir>/<incident_id>/`; returns that path."""
    files = [Path(f) for f in files]
    if not files:
        raise InputError("kineto", "no trace files given")
    out_dir = incident_dir(incidents_dir, incident_id)
    if (out_dir / MANIFEST).exists():
        raise StallcaseError(out_dir, "incident already exists: choose another --incident or remove it")
    try:
        step_rx = re.compile(step_pattern or DEFAULT_STEP_PATTERN)
    except re.error as exc:
        raise InputError("--step-pattern", f"not a valid regex: {exc}") from None
    if step_rx.groups != 1:
        raise InputError("--step-pattern", "the regex needs exactly one group capturing the step id")
    parts: dict[str, list[pa.Table]] = {}
    ranks, unix_known, artifacts = [], True, []
    for i, path in enumerate(files):
        arr, meta = _read_one(path)
        rank = _rank_of(meta, i, path)
        if rank in ranks:
            raise InputError(path, f"rank {rank} appears in more than one trace file")
        ranks.append(rank)
        base, shift, known = _base(meta, arr, path)
        unix_known &= known
        for name, t in _tables_for(arr, rank, base, shift, step_rx).items():
            parts.setdefault(name, []).append(t)
        artifacts.append({"role": "input", "path": str(path.resolve()), "relpath": None,
                          "digest": hash_file(path), "size": path.stat().st_size})
        del arr
    data = {name: pa.concat_tables(ts, promote_options="permissive") for name, ts in parts.items()}
    if data["steps"].num_rows == 0:
        raise InputError(files[0], f"no step spans match {step_rx.pattern!r}: profile with schedule/step() or pass --step-pattern")
    write_incident(out_dir, _manifest(incident_id, data, ranks, unix_known, artifacts, step_rx.pattern), data)
    return out_dir


def _manifest(incident_id: str, data: dict[str, pa.Table], ranks: list[int], unix_known: bool, artifacts: list, pattern: str) -> dict:
    gpu = data["kernels"].num_rows + data["memcpy"].num_rows
    not_in_kineto = "Kineto traces carry no {}"
    starts = [pc.min(t["start_ns"]).as_py() for t in data.values() if t.num_rows]
    ends = [pc.max(t["end_ns"]).as_py() for t in data.values() if t.num_rows]
    return {
        "incident_id": incident_id,
        "reason": "import",
        "producer": "kineto-import",
        "clock": {"host": "realtime", "unix_minus_host_ns": 0 if unix_known else None},
        "window": {"start_ns": min(starts), "end_ns": max(ends)} if starts else None,
        "ranks": sorted(ranks),
        "sources": {
            "kernels": source("observed") if gpu else source("not_observed", "trace has no GPU activity (profiled without ProfilerActivity.CUDA?)"),
            "memcpy": source("observed") if gpu else source("not_observed", "trace has no GPU activity"),
            "runtime_api": source("observed") if data["runtime_api"].num_rows else source("not_observed", "trace has no cuda_runtime/cuda_driver events"),
            "spans": source("observed") if data["spans"].num_rows else source("not_observed", "trace has no cpu_op/user_annotation events"),
            "steps": source("observed", None, pattern=pattern),
            "sched": source("not_observed", not_in_kineto.format("scheduler samples")),
            "nvml": source("not_observed", not_in_kineto.format("NVML samples")),
            "clock_sync": source("not_observed", "Kineto maps GPU times onto the host clock itself (CUPTI); no calibration rows"),
            "collectives": source("not_observed", "Kineto has no per-collective sequence ids; NCCL kernels are in the kernels table"),
        },
        "artifacts": artifacts,
        "trigger": None,
        "workload": None,
    }
