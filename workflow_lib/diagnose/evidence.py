"""The evidence the checks read, per rank, as NumPy arrays on a relative timeline.

Built once per diagnosis from the incident's Arrow tables (column conversions, no per-event
Python). All times are shifted by `origin_ns` so that interval arithmetic on absolute Unix
nanoseconds (Kineto imports) cannot overflow int64.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import vocabulary
from ..core.incident import Incident
from . import measures, save_shape
from .index import IntervalIndex
from .fast import searchsorted
from .types import DiagnoseOptions, Intervals

# Names (launch calls, NCCL/RCCL kernels, sync and allocator calls) come from one vocabulary.
LAUNCH_RE = vocabulary.LAUNCH_RE
NCCL_RE = vocabulary.COLLECTIVE_KERNEL_RE
rank_key = vocabulary.rank_key


def _i64(col) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), np.int64)


class Names:
    """A string column as dictionary codes: names repeat (a few hundred distinct kernel names
    over a million launches), so regexes run per distinct name and no per-row str exists."""

    def __init__(self, col):
        if len(col) == 0:
            self.codes, self.dictionary = np.zeros(0, np.int32), np.zeros(0, object)
            return
        enc = pc.dictionary_encode(col)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        self.codes = enc.indices.to_numpy(zero_copy_only=False)
        self.dictionary = np.asarray(enc.dictionary.to_pylist(), object)

    def __getitem__(self, idx) -> np.ndarray:
        return self.dictionary[self.codes[idx]]

    def matches(self, rx: re.Pattern) -> np.ndarray:
        return self.where(lambda n: rx.search(n))

    def where(self, fn) -> np.ndarray:
        hits = np.array([bool(fn(str(n))) for n in self.dictionary], bool)
        return hits[self.codes] if hits.size else np.zeros(self.codes.size, bool)


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
    k_stream: np.ndarray  # the stream each kernel ran on
    k_name: Names
    gpu_start_sorted: np.ndarray  # starts of all GPU activity (kernels+memcpy), ascending
    gpu_corr_sorted: np.ndarray  # their correlation ids in the same order
    kernel_busy: Intervals  # union of kernels only: copy-engine time is not compute
    copies: "Copies"
    rt_name: Names
    rt_start: np.ndarray
    rt_end: np.ndarray
    rt_thread: np.ndarray
    rt_corr: np.ndarray
    rt_sync: np.ndarray
    rt_launch: np.ndarray
    rt_alloc: np.ndarray  # allocator calls (vocabulary.ALLOC_CALLS)
    rt_index: IntervalIndex  # runtime calls by time (rows sorted by start)
    rt_corr_order: np.ndarray  # row indices sorted by correlation id
    rt_corr_sorted: np.ndarray  # rt_corr[rt_corr_order]
    api_union: Intervals
    sync_union: Intervals
    alloc_union: Intervals
    span_name: Names
    span_thread: np.ndarray
    span_depth: np.ndarray
    span_start: np.ndarray
    span_end: np.ndarray
    span_index: IntervalIndex
    span_is_wait: np.ndarray  # bool: the span is a declared wait
    span_is_compile: np.ndarray  # bool: the span names compilation or autotuning (vocabulary.COMPILE_RE)
    span_starts_by_thread: dict[int, np.ndarray]  # thread -> its span starts, ascending
    span_first_start: np.ndarray  # per span-name code: the earliest start of a span of that name
    wait_union: Intervals
    nccl_union: Intervals
    sched: dict[int, Sched]
    nvml: dict[str, tuple[np.ndarray, np.ndarray]]  # metric -> (ts_ns, value), all devices of the rank
    clock_uncertainty_ns: int | None  # None: not measured
    span_is_gc: np.ndarray = None  # bool: a Python GC collection (vocabulary.GC_SPAN)
    span_is_checkpoint: np.ndarray = None  # bool: a checkpoint save (vocabulary.CHECKPOINT_SPANS)
    details: "SpanDetails" = None  # attributes of GC and checkpoint spans (the span_details table)
    saves_inferred: object = None  # save_shape.InferredSaves: torch.save's shape where no save span names it
    k_ident: np.ndarray = None  # per kernel: its identity (name and launch shape) as a small code
    cupti_reattached: bool = True  # correlation ids may start again (cupti_reattached(); launch_rows_at)


@dataclass(frozen=True)
class SpanDetails:
    """The span_details rows of a rank (relative ns), sorted by start: what a GC collection or a
    checkpoint save carried besides its times; -1 where not known."""

    name: np.ndarray  # object
    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    generation: np.ndarray
    objects: np.ndarray
    nbytes: np.ndarray

    def of(self, name: str, thread: int, start: int) -> int | None:
        """The row of the span (name, thread, start), found as tables.py says: None when absent."""
        i = int(searchsorted(self.start, start, side="left"))
        while i < self.start.size and self.start[i] == start:
            if self.thread[i] == thread and self.name[i] == name:
                return i
            i += 1
        return None


def _kernel_identity(k: pa.Table, names: "Names") -> np.ndarray:
    """Per kernel: a code for (name, grid, block): the same kernel launched the same way."""
    if k.num_rows == 0:
        return np.zeros(0, np.int64)
    cols = [names.codes.astype(np.int64)]
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
        if c in k.column_names:
            cols.append(np.asarray(pc.fill_null(k[c], -1).to_numpy(), np.int64))
    return _row_codes(cols)


def _row_codes(cols: list[np.ndarray]) -> np.ndarray:
    """Per row of the columns: its rank among the distinct rows in lexicographic order (what
    np.unique(np.stack(cols, 1), axis=0, return_inverse=True) gives), by one lexsort: unique over
    rows sorted a structured copy, ~1 s of the 1M-event Kineto benchmark's 2.5 s diagnosis."""
    order = np.lexsort(cols[::-1])  # lexsort's last key is the primary one
    new = np.zeros(order.size, bool)
    if order.size:
        new[0] = True
        for c in cols:
            sc = c[order]
            new[1:] |= sc[1:] != sc[:-1]
    out = np.empty(order.size, np.int64)
    out[order] = np.cumsum(new) - 1
    return out


def _details(t: pa.Table, origin_ns: int) -> SpanDetails:
    t = _sorted(t)
    n = t.num_rows

    def ints(col):
        return np.asarray(pc.fill_null(t[col], -1).to_numpy(), np.int64) if n else np.zeros(0, np.int64)

    return SpanDetails(np.asarray(t["name"].to_pylist(), object) if n else np.zeros(0, object), ints("thread_id"),
                       ints("start_ns") - origin_ns, ints("end_ns") - origin_ns, ints("generation"), ints("objects"),
                       ints("bytes"))


@dataclass(frozen=True)
class Copies:
    """The rank's memcpy/memset rows, sorted by start (relative ns). Memory kinds are the
    tables' words (pageable, pinned, device, managed, array) or "" where not observed;
    is_async is 1, 0 or -1 (not observed)."""

    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray  # object: HtoD, DtoH, DtoD, PtoP, memset, ...
    src_kind: np.ndarray  # object
    dst_kind: np.ndarray  # object
    is_async: np.ndarray  # int8
    nbytes: np.ndarray  # int64, -1 where unknown
    stream: np.ndarray
    corr: np.ndarray  # -1 where unknown

    def in_window(self, lo: int, hi: int) -> np.ndarray:
        """Rows overlapping [lo, hi) (copies are short: a start search with a generous margin)."""
        i = int(searchsorted(self.start, lo - _COPY_MARGIN_NS, side="left"))
        j = int(searchsorted(self.start, hi, side="left"))
        rows = np.arange(i, j)
        return rows[self.end[rows] > lo]

    def reached_from(self, rows: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Whether in_window(lo, ...) looks back far enough to find each row (for windows
        starting at `lo`, one per row): the same margin, for all steps at once."""
        return self.start[rows] >= lo - _COPY_MARGIN_NS


# Longest copy looked back for when finding a window's copies (a 1 GiB pageable copy at 3 GB/s).
_COPY_MARGIN_NS = 1_000_000_000


def _copies(m: pa.Table, origin_ns: int) -> Copies:
    m = _sorted(m)
    n = m.num_rows

    def strs(name):
        if n == 0 or name not in m.column_names:
            return np.full(n, "", object)
        return np.asarray(pc.fill_null(m[name].cast(pa.string()), "").to_pylist(), object)

    if n and "is_async" in m.column_names:
        a = m["is_async"].to_pylist()
        is_async = np.array([-1 if v is None else int(bool(v)) for v in a], np.int8)
    else:
        is_async = np.full(n, -1, np.int8)
    return Copies(
        start=_i64(m["start_ns"]) - origin_ns, end=_i64(m["end_ns"]) - origin_ns, kind=strs("kind"),
        src_kind=strs("src_kind"), dst_kind=strs("dst_kind"), is_async=is_async,
        nbytes=np.asarray(pc.fill_null(m["bytes"], -1).to_numpy(), np.int64) if n else np.zeros(0, np.int64),
        stream=_i64(m["stream"]) if n else np.zeros(0, np.int64),
        corr=np.asarray(pc.fill_null(m["correlation_id"], -1).to_numpy(), np.int64) if n else np.zeros(0, np.int64),
    )


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
    # A step outside every window in which CUPTI was armed, of a rank whose GPU activity was
    # recorded elsewhere: read without kernels, but the program has a GPU (columns.py).
    gpu_outside_window: bool = False
    # What the capture counted as lost of the GPU and runtime records (ring wrap-around, unread
    # CUPTI buffers, CUPTI errors): empty when nothing was, or nothing was counted (Kineto).
    gpu_loss: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankInput:
    """What a check reads of its rank, in either form it runs in (batch.StepsInput for all steps,
    checks/base.CheckInput for one): the evidence, which sources were observed, and the options.
    The one carrier of the options to the checks: both inputs hold it, neither copies its parts."""

    ev: RankEvidence
    src: Sources
    opts: DiagnoseOptions


def _table_for_rank(t: pa.Table, rk: int) -> pa.Table:
    if t.num_rows == 0:
        return t
    mine = rank_key(t["rank"]) == rk
    return t if mine.all() else t.filter(pa.array(mine))  # one rank: no copy


def sources_of(inc: Incident) -> Sources:
    producer = str(inc.manifest.get("producer", ""))
    steps_ranks = set(rank_key(inc.table("steps")["rank"]).tolist())
    # An incident read rank by rank lists a table's ranks without reading its rows.
    k_ranks = set((inc.ranks("kernels") if hasattr(inc, "ranks") else rank_key(inc.table("kernels")["rank"])).tolist())

    def seen(name: str) -> bool:
        src = inc.manifest["sources"].get(name)
        if src is not None:
            return src["status"] == "observed"  # required by the manifest schema
        return inc.table(name).num_rows > 0

    return Sources(
        kernels=seen("kernels"), runtime_api=seen("runtime_api"), spans=seen("spans"), sched=seen("sched"),
        nvml=seen("nvml"), clock_sync=seen("clock_sync"), shared_timebase=producer in vocabulary.SHARED_TIMEBASE_PRODUCERS,
        ranks=len(steps_ranks | k_ranks) or 1, gpu_loss=capture_losses(inc.manifest),
    )


def capture_losses(manifest: dict) -> tuple[str, ...]:
    """The capture's own count of GPU and runtime records it lost (the recorder's CUPTI source:
    capture/sources/cupti.py manifest_entry), one line per loss."""
    d = (manifest["sources"].get("cupti") or {}).get("detail") or {}  # sources: required; cupti, detail: optional
    out = [f"{n}: {int(d[f'{n}_overwritten'])} records overwritten in the capture's ring"
           for n in ("kernels", "memcpy", "runtime_api") if int(d.get(f"{n}_overwritten") or 0) > 0]
    if int(d.get("raw_buffers_unread") or 0) > 0:
        out.append(f"{int(d['raw_buffers_unread'])} CUPTI buffers not read")
    if int(d.get("error_count") or 0) > 0:
        out.append(f"{int(d['error_count'])} CUPTI errors")
    return tuple(out)


def cupti_reattached(manifest: dict) -> bool:
    """Whether the capture may hold several CUPTI sessions, whose correlation ids each start
    again (launch_rows_at): a recorder capture that detached CUPTI between its GPU windows, or one
    too old to say (capture/sources/cupti.py counts `detached_between_windows`). An imported
    trace is one profiler session: its ids never start again, and an id far below the ones before
    it (a synthetic trace's syncs carry ids of their own) is not a new session."""
    if str(manifest.get("producer", "")) in vocabulary.SHARED_TIMEBASE_PRODUCERS:  # kineto-import, nsys-import
        return False
    d = (manifest["sources"].get("cupti") or {}).get("detail") or {}  # sources: required; cupti, detail: optional
    n = d.get("detached_between_windows")
    return n is None or int(n) > 0


def origin_of(inc: Incident) -> int:
    """Earliest step start: the relative timeline's zero."""
    steps = inc.table("steps")
    if steps.num_rows == 0:
        return 0
    return int(pc.min(steps["start_ns"]).as_py())


def build(inc: Incident, rk: int, origin_ns: int, wait_re: re.Pattern) -> RankEvidence:
    k = _sorted(_table_for_rank(inc.table("kernels"), rk))
    m = _table_for_rank(inc.table("memcpy"), rk)
    k_start = _i64(k["start_ns"]) - origin_ns
    k_end = _i64(k["end_ns"]) - origin_ns
    k_corr = pc.fill_null(k["correlation_id"], -1).to_numpy() if k.num_rows else np.zeros(0, np.int64)
    k_name = Names(k["name"])
    k_nccl = k_name.matches(NCCL_RE)
    m_start = _i64(m["start_ns"]) - origin_ns
    m_end = _i64(m["end_ns"]) - origin_ns
    m_corr = pc.fill_null(m["correlation_id"], -1).to_numpy() if m.num_rows else np.zeros(0, np.int64)
    g_start = np.concatenate([k_start, m_start])
    g_corr = np.concatenate([k_corr, m_corr]).astype(np.int64)
    order = np.argsort(g_start, kind="stable")
    devices = sorted(set(pc.unique(k["device"]).to_pylist()) | set(pc.unique(m["device"]).to_pylist()))

    r = _sorted(_table_for_rank(inc.table("runtime_api"), rk))
    rt_start = _i64(r["start_ns"]) - origin_ns
    rt_end = _i64(r["end_ns"]) - origin_ns
    rt_names = Names(r["name"])
    # The stored is_sync of older captures or OR-ed with the one vocabulary (which also knows
    # HIP and driver spellings the writer may not have).
    rt_sync = r["is_sync"].to_numpy(zero_copy_only=False).astype(bool) if r.num_rows else np.zeros(0, bool)
    rt_sync = rt_sync | rt_names.where(vocabulary.is_sync_call)
    rt_launch = rt_names.matches(LAUNCH_RE)
    rt_alloc = rt_names.where(vocabulary.is_alloc_call)

    rt_corr = np.asarray(pc.fill_null(r["correlation_id"], -1).to_numpy(), np.int64) if r.num_rows else np.zeros(0, np.int64)
    corr_order = np.argsort(rt_corr, kind="stable")

    s = _sorted(_table_for_rank(inc.table("spans"), rk))
    span_name = Names(s["name"])
    span_start = _i64(s["start_ns"]) - origin_ns
    span_end = _i64(s["end_ns"]) - origin_ns
    is_wait = span_name.matches(wait_re)

    ev = RankEvidence(
        rank=None if rk < 0 else int(rk),
        devices=tuple(int(d) for d in devices),
        busy=measures.union(g_start, np.concatenate([k_end, m_end])),
        kernel_busy=measures.union(k_start, k_end), copies=_copies(m, origin_ns),
        k_start=k_start, k_end=k_end, k_corr=np.asarray(k_corr, np.int64), k_nccl=k_nccl, k_name=k_name,
        k_stream=_i64(k["stream"]) if k.num_rows else np.zeros(0, np.int64),
        gpu_start_sorted=g_start[order], gpu_corr_sorted=g_corr[order],
        rt_name=rt_names, rt_start=rt_start, rt_end=rt_end, rt_thread=_i64(r["thread_id"]),
        rt_corr=rt_corr,
        rt_sync=rt_sync, rt_launch=rt_launch, rt_alloc=rt_alloc, rt_index=IntervalIndex(rt_start, rt_end),
        rt_corr_order=corr_order, rt_corr_sorted=rt_corr[corr_order],
        api_union=measures.union(rt_start, rt_end),
        sync_union=measures.union(rt_start[rt_sync], rt_end[rt_sync]),
        alloc_union=measures.union(rt_start[rt_alloc], rt_end[rt_alloc]),
        span_name=span_name, span_thread=_i64(s["thread_id"]),
        span_depth=np.asarray(s["depth"].to_numpy(zero_copy_only=False), np.int64) if s.num_rows else np.zeros(0, np.int64),
        span_start=span_start, span_end=span_end, span_index=IntervalIndex(span_start, span_end), span_is_wait=is_wait, span_is_compile=span_name.matches(vocabulary.COMPILE_RE),
        span_starts_by_thread=_starts_by_thread(_i64(s["thread_id"]), span_start),
        span_first_start=_first_start(span_name, span_start),
        wait_union=measures.union(span_start[is_wait], span_end[is_wait]),
        nccl_union=measures.union(k_start[k_nccl], k_end[k_nccl]),
        sched=_sched(_table_for_rank(inc.table("sched"), rk), origin_ns),
        nvml=_nvml(_table_for_rank(inc.table("nvml"), rk), origin_ns),
        clock_uncertainty_ns=_clock(_table_for_rank(inc.table("clock_sync"), rk)),
        k_ident=_kernel_identity(k, k_name), cupti_reattached=cupti_reattached(inc.manifest),
        span_is_gc=span_name.where(lambda x: x == vocabulary.GC_SPAN),
        span_is_checkpoint=span_name.where(lambda x: x in vocabulary.CHECKPOINT_SPANS),
        details=_details(_table_for_rank(inc.table("span_details"), rk), origin_ns),
    )
    # torch.save's shape where no save span names it: the device->host copies and their calls.
    d2h = np.flatnonzero(ev.copies.kind == "DtoH")
    call, ok = launch_rows_at(ev, ev.copies.corr[d2h], ev.copies.start[d2h])
    return replace(ev, saves_inferred=save_shape.find(ev, d2h[ok], call[ok]))


def _sorted(t: pa.Table) -> pa.Table:
    """Rows by start time: every per-step lookup is then a binary search. Importers write
    tables sorted already; then this is a check, not a copy."""
    if t.num_rows == 0 or bool(np.all(np.diff(_i64(t["start_ns"])) >= 0)):
        return t
    return t.sort_by([("start_ns", "ascending")])


def _first_start(names: Names, start: np.ndarray) -> np.ndarray:
    first = np.full(len(names.dictionary), np.iinfo(np.int64).max, np.int64)
    if start.size:
        np.minimum.at(first, names.codes, start)
    return first


def _starts_by_thread(tid: np.ndarray, start: np.ndarray) -> dict[int, np.ndarray]:
    if tid.size == 0:
        return {}
    order = np.lexsort((start, tid))
    t, st = tid[order], start[order]
    cut = np.flatnonzero(np.diff(t)) + 1
    return {int(t[lo]): st[lo:hi] for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [t.size]]))}


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


def launch_rows_at(ev: RankEvidence, corr: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU activity with correlation id `corr` starting at `start`: (its launch call's runtime
    row, whether one matched): the latest call with its id that started at or before it, in the
    same CUPTI session. Correlation ids repeat where the recorder detached CUPTI between GPU
    windows and attached it again (ids start again): an id alone can name a call of an earlier
    session, whose activity it is not (the activity's own call was launched before the window
    opened, unrecorded). The one join of GPU work to its launch calls (held time, launch_bound,
    host_stall, host_submission, transfer_stall, the inferred saves)."""
    corr = np.asarray(corr, np.int64)
    start = np.asarray(start, np.int64)
    rows = np.zeros(corr.size, np.int64)
    ok = np.zeros(corr.size, bool)
    order = ev.rt_corr_order
    if order.size == 0 or corr.size == 0:
        return rows, ok
    key, sess = _launch_join(ev)
    sc = ev.rt_corr_sorted
    lo = searchsorted(sc, corr, side="left")
    known = (lo < sc.size) & (corr >= 0)
    known[known] = sc[lo[known]] == corr[known]
    rows[known] = order[lo[known]]  # the id's first call, where none started by the activity
    # (corr, how many calls started by t) orders the calls as `key` does: the last key at or
    # below the activity's is the latest call with its id that started by then.
    by_then = searchsorted(ev.rt_start, start, side="right")  # calls started by each activity (read twice)
    q = corr * (ev.rt_start.size + 1) + by_then
    at = searchsorted(key, q, side="right") - 1
    hit = known & (at >= lo)
    rows[hit] = order[at[hit]]
    ok[hit] = True
    # A call of an earlier CUPTI session with the same id is not the launch.
    before = by_then - 1
    ok &= (before >= 0) & (sess[rows] == sess[np.maximum(before, 0)])
    return rows, ok


_PER_RANK: dict = {}


def per_rank(ev, name: str, make, key=None):
    """make(), what `name` derives from one rank's evidence, made once per evidence object (and
    `key`, the options it depends on): the checks' column and per-step forms share it. One
    rank's evidence at a time per name, held by a weak reference (never keeps the evidence
    alive); an evidence stand-in (a namespace) cannot be weakly referenced and is not cached."""
    hit = _PER_RANK.get(name)
    if hit is not None and hit[0]() is ev and hit[1] == key:
        return hit[2]
    out = make()
    try:
        _PER_RANK[name] = (weakref.ref(ev), key, out)
    except TypeError:
        _PER_RANK.pop(name, None)
    return out


def _launch_join(ev: RankEvidence) -> tuple[np.ndarray, np.ndarray]:
    """(the calls' join keys in rt_corr_order, each call's CUPTI session), once per evidence."""
    return per_rank(ev, "launch_join", lambda: _launch_join_of(ev))


def _launch_join_of(ev: RankEvidence) -> tuple[np.ndarray, np.ndarray]:
    order = ev.rt_corr_order
    # Calls of one id are in start order within rt_corr_order (a stable sort of start-sorted rows).
    key = ev.rt_corr_sorted * (ev.rt_start.size + 1) + searchsorted(ev.rt_start, ev.rt_start[order], side="right")
    return key, (cupti_sessions(ev.rt_corr) if ev.cupti_reattached else np.zeros(ev.rt_corr.size, np.int64))


def cupti_sessions(corr: np.ndarray) -> np.ndarray:
    """Per runtime call (in start order): its CUPTI session, a new one where the correlation
    ids restart (an id below half the session's largest so far: threads interleave ids by a
    few, a restart drops them back to the start). Each session's restart is looked for in a
    window that grows from its start, so the whole costs about one pass over the calls however
    many sessions there are (a trace whose ids jump about can show hundreds: the 1M-event Kineto
    benchmark's syncs carry ids of their own, 830 "restarts", which a scan of the rest of the
    calls per session made 0.9 s of a 2.5 s diagnosis)."""
    n = corr.size
    marks = np.zeros(n, np.int64)
    at = 0
    while at < n:
        w = 4096
        while True:
            seg = corr[at:at + w]
            c = np.maximum(seg, 0)
            drop = np.flatnonzero((seg > 0) & (c < np.maximum.accumulate(c) // 2))  # CUPTI ids start at 1
            if drop.size or at + w >= n:
                break
            w *= 4
        if drop.size == 0:
            break
        at += int(drop[0])
        marks[at] = 1
    return np.cumsum(marks)


def step_sched(ev: RankEvidence, tid: int, lo: int, hi: int) -> dict | None:
    """The thread's scheduler counters over a step [lo, hi): samples nearest each boundary,
    each within max(10% of the step, 200 us) of it (the recorder marks step boundaries itself).
    Returns {cpu_ns, runqueue_wait_ns, span_ns} or None when the step is not bracketed."""
    s = ev.sched.get(int(tid))
    if s is None or s.ts_ns.size < 2:
        return None
    tol = max((hi - lo) // 10, 200_000)
    i0 = int(searchsorted(s.ts_ns, lo, side="right")) - 1
    if i0 + 1 < s.ts_ns.size and (i0 < 0 or abs(s.ts_ns[i0 + 1] - lo) < abs(lo - s.ts_ns[i0])):
        i0 += 1
    i1 = int(searchsorted(s.ts_ns, hi, side="left"))
    if i1 - 1 >= 0 and (i1 >= s.ts_ns.size or abs(hi - s.ts_ns[i1 - 1]) < abs(s.ts_ns[i1] - hi)):
        i1 -= 1
    if i0 < 0 or i1 >= s.ts_ns.size or i1 <= i0:
        return None
    if abs(int(s.ts_ns[i0]) - lo) > tol or abs(int(s.ts_ns[i1]) - hi) > tol:
        return None
    dcpu = s.cpu_time_ns[i1] - s.cpu_time_ns[i0]
    drq = s.runqueue_wait_ns[i1] - s.runqueue_wait_ns[i0]
    if not (np.isfinite(dcpu) and np.isfinite(drq)):
        return None
    return {"cpu_ns": int(max(dcpu, 0)), "runqueue_wait_ns": int(max(drq, 0)), "span_ns": int(s.ts_ns[i1] - s.ts_ns[i0])}


def launching_threads(ev: RankEvidence, lo: int, hi: int, step_thread: int) -> list[int]:
    """The step's own thread and every thread that issued a launch call inside the step
    (the autograd/backward thread included)."""
    rows = ev.rt_index.overlapping(lo, hi)
    tids = set(np.unique(ev.rt_thread[rows[ev.rt_launch[rows]]]).tolist()) if rows.size else set()
    return [int(step_thread)] + sorted(int(t) for t in tids if int(t) != int(step_thread))
