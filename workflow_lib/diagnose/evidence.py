"""The evidence the checks read, per rank, as NumPy arrays on a relative timeline.

Built once per diagnosis from the incident's Arrow tables (column conversions, no per-event
Python). All times are shifted by `origin_ns` so that interval arithmetic on absolute Unix
nanoseconds (Kineto imports) cannot overflow int64.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..incident import Incident
from . import measures
from .types import Intervals

# Runtime/driver calls that enqueue GPU work: what a launch-bound host spends its time in.
LAUNCH_RE = re.compile(r"(LaunchKernel|cuLaunch|LaunchCooperative|cudaGraphLaunch|cuGraphLaunch|MemcpyAsync|MemsetAsync)", re.IGNORECASE)
NCCL_RE = re.compile(r"nccl", re.IGNORECASE)


def _rank_key(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Ranks as int64 with -1 for null (single-process work)."""
    return pc.fill_null(col.cast(pa.int64()), -1).to_numpy()


def _i64(col) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), np.int64)


@dataclass(frozen=True)
class Sched:
    """Scheduler samples of one thread, sorted by time."""

    ts_ns: np.ndarray
    state: np.ndarray
    cpu_time_ns: np.ndarray  # float, NaN where unknown
    runqueue_wait_ns: np.ndarray  # float, NaN where unknown


@dataclass(frozen=True)
class RankEvidence:
    """Everything the checks need about one rank."""

    rank: int | None
    devices: tuple[int, ...]
    busy: Intervals
    k_start: np.ndarray
    k_end: np.ndarray
    k_corr: np.ndarray  # -1 where unknown
    k_nccl: np.ndarray  # bool
    gpu_start_sorted: np.ndarray  # starts of all GPU activity (kernels+memcpy), ascending
    gpu_corr_sorted: np.ndarray  # their correlation ids in the same order
    rt_name: np.ndarray  # object
    rt_start: np.ndarray
    rt_end: np.ndarray
    rt_thread: np.ndarray
    rt_corr: np.ndarray
    rt_sync: np.ndarray
    rt_launch: np.ndarray
    api_union: Intervals
    sync_union: Intervals
    span_name: np.ndarray  # object
    span_thread: np.ndarray
    span_depth: np.ndarray
    span_start: np.ndarray
    span_end: np.ndarray
    wait_union: Intervals
    sched: dict[int, Sched]
    nvml: dict[str, tuple[np.ndarray, np.ndarray]]  # metric -> (ts_ns, value), all devices of the rank
    clock_uncertainty_ns: int | None  # None: not measured


@dataclass(frozen=True)
class Sources:
    """Which evidence the incident holds (from the manifest and the tables)."""

    kernels: bool
    runtime_api: bool
    spans: bool
    sched: bool
    nvml: bool
    clock_sync: bool
    shared_timebase: bool  # GPU and host timestamps come from one corrected clock (Kineto)
    ranks: int


def _table_for_rank(t: pa.Table, rank_key: int) -> pa.Table:
    if t.num_rows == 0:
        return t
    return t.filter(pa.array(_rank_key(t["rank"]) == rank_key))


def sources_of(inc: Incident) -> Sources:
    producer = str(inc.manifest.get("producer", ""))
    steps_ranks = set(_rank_key(inc.table("steps")["rank"]).tolist())
    k_ranks = set(_rank_key(inc.table("kernels")["rank"]).tolist())

    def seen(name: str) -> bool:
        src = inc.manifest["sources"].get(name)
        if src is not None:
            return src.get("status") == "observed"
        return inc.table(name).num_rows > 0

    return Sources(
        kernels=seen("kernels"), runtime_api=seen("runtime_api"), spans=seen("spans"), sched=seen("sched"),
        nvml=seen("nvml"), clock_sync=seen("clock_sync"), shared_timebase=producer.startswith("kineto"),
        ranks=len(steps_ranks | k_ranks) or 1,
    )


def origin_of(inc: Incident) -> int:
    """Earliest step start: the relative timeline's zero."""
    steps = inc.table("steps")
    if steps.num_rows == 0:
        return 0
    return int(pc.min(steps["start_ns"]).as_py())


def build(inc: Incident, rank_key: int, origin_ns: int, wait_re: re.Pattern) -> RankEvidence:
    k = _table_for_rank(inc.table("kernels"), rank_key)
    m = _table_for_rank(inc.table("memcpy"), rank_key)
    k_start = _i64(k["start_ns"]) - origin_ns
    k_end = _i64(k["end_ns"]) - origin_ns
    k_corr = pc.fill_null(k["correlation_id"], -1).to_numpy() if k.num_rows else np.zeros(0, np.int64)
    k_names = k["name"].to_numpy(zero_copy_only=False) if k.num_rows else np.zeros(0, object)
    # Classify distinct names, not events: kernel names repeat thousands of times.
    uniq, inv = np.unique(k_names, return_inverse=True) if k_names.size else (np.zeros(0, object), np.zeros(0, np.int64))
    k_nccl = np.array([bool(NCCL_RE.search(str(n))) for n in uniq], bool)[inv] if uniq.size else np.zeros(0, bool)
    m_start = _i64(m["start_ns"]) - origin_ns
    m_end = _i64(m["end_ns"]) - origin_ns
    m_corr = pc.fill_null(m["correlation_id"], -1).to_numpy() if m.num_rows else np.zeros(0, np.int64)
    g_start = np.concatenate([k_start, m_start])
    g_corr = np.concatenate([k_corr, m_corr]).astype(np.int64)
    order = np.argsort(g_start, kind="stable")
    devices = sorted(set(k["device"].to_pylist()) | set(m["device"].to_pylist())) if (k.num_rows or m.num_rows) else []

    r = _table_for_rank(inc.table("runtime_api"), rank_key)
    rt_start = _i64(r["start_ns"]) - origin_ns
    rt_end = _i64(r["end_ns"]) - origin_ns
    rt_sync = r["is_sync"].to_numpy(zero_copy_only=False).astype(bool) if r.num_rows else np.zeros(0, bool)
    rt_names = r["name"].to_numpy(zero_copy_only=False) if r.num_rows else np.zeros(0, object)
    if rt_names.size:
        ru, rinv = np.unique(rt_names, return_inverse=True)
        rt_launch = np.array([bool(LAUNCH_RE.search(str(n))) for n in ru], bool)[rinv]
    else:
        rt_launch = np.zeros(0, bool)

    s = _table_for_rank(inc.table("spans"), rank_key)
    span_name = s["name"].to_numpy(zero_copy_only=False) if s.num_rows else np.zeros(0, object)
    span_start = _i64(s["start_ns"]) - origin_ns
    span_end = _i64(s["end_ns"]) - origin_ns
    if span_name.size:
        su, sinv = np.unique(span_name, return_inverse=True)
        is_wait = np.array([bool(wait_re.search(str(n))) for n in su], bool)[sinv]
    else:
        is_wait = np.zeros(0, bool)

    return RankEvidence(
        rank=None if rank_key < 0 else int(rank_key),
        devices=tuple(int(d) for d in devices),
        busy=measures.union(g_start, np.concatenate([k_end, m_end])),
        k_start=k_start, k_end=k_end, k_corr=np.asarray(k_corr, np.int64), k_nccl=k_nccl,
        gpu_start_sorted=g_start[order], gpu_corr_sorted=g_corr[order],
        rt_name=rt_names, rt_start=rt_start, rt_end=rt_end, rt_thread=_i64(r["thread_id"]),
        rt_corr=np.asarray(pc.fill_null(r["correlation_id"], -1).to_numpy(), np.int64) if r.num_rows else np.zeros(0, np.int64),
        rt_sync=rt_sync, rt_launch=rt_launch,
        api_union=measures.union(rt_start, rt_end),
        sync_union=measures.union(rt_start[rt_sync], rt_end[rt_sync]),
        span_name=span_name, span_thread=_i64(s["thread_id"]),
        span_depth=np.asarray(s["depth"].to_numpy(zero_copy_only=False), np.int64) if s.num_rows else np.zeros(0, np.int64),
        span_start=span_start, span_end=span_end,
        wait_union=measures.union(span_start[is_wait], span_end[is_wait]),
        sched=_sched(_table_for_rank(inc.table("sched"), rank_key), origin_ns),
        nvml=_nvml(_table_for_rank(inc.table("nvml"), rank_key), origin_ns),
        clock_uncertainty_ns=_clock(_table_for_rank(inc.table("clock_sync"), rank_key)),
    )


def _sched(t: pa.Table, origin_ns: int) -> dict[int, Sched]:
    if t.num_rows == 0:
        return {}
    t = t.sort_by([("thread_id", "ascending"), ("ts_ns", "ascending")])
    tid = _i64(t["thread_id"])
    ts = _i64(t["ts_ns"]) - origin_ns
    state = t["state"].to_numpy(zero_copy_only=False)
    cpu = t["cpu_time_ns"].cast(pa.float64()).to_numpy(zero_copy_only=False)
    rq = t["runqueue_wait_ns"].cast(pa.float64()).to_numpy(zero_copy_only=False)
    bounds = np.flatnonzero(np.diff(tid)) + 1
    out = {}
    # One slice per thread (threads are few).
    for lo, hi in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [tid.size]])):
        out[int(tid[lo])] = Sched(ts[lo:hi], state[lo:hi], np.asarray(cpu[lo:hi], float), np.asarray(rq[lo:hi], float))
    return out


def _nvml(t: pa.Table, origin_ns: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    if t.num_rows == 0:
        return {}
    t = t.sort_by([("metric", "ascending"), ("ts_ns", "ascending")])
    out = {}
    for metric in pc.unique(t["metric"]).to_pylist():
        sub = t.filter(pc.equal(t["metric"], metric))
        out[metric] = (_i64(sub["ts_ns"]) - origin_ns, np.asarray(sub["value"].to_numpy(), float))
    return out


def _clock(t: pa.Table) -> int | None:
    if t.num_rows == 0:
        return None
    return int(pc.max(t["uncertainty_ns"]).as_py())
