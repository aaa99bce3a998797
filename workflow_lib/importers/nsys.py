"""`stallcase import nsys`: Nsight Systems SQLite exports -> an incident directory.

What is read (importers/nsys_schema.py says how each nsys version spells it):
  kernels      CUPTI_ACTIVITY_KIND_KERNEL, names through StringIds (demangledName, else shortName)
  memcpy       CUPTI_ACTIVITY_KIND_MEMCPY (kind from copyKind, memory kinds from srcKind/dstKind)
               and CUPTI_ACTIVITY_KIND_MEMSET (kind "memset"), with bytes
  runtime_api  CUPTI_ACTIVITY_KIND_RUNTIME (CUDA runtime and driver calls, names through nameId,
               version suffixes folded: cudaMemcpy_v3020 -> cudaMemcpy) and
               CUPTI_ACTIVITY_KIND_SYNCHRONIZATION as `cuda_sync:<TYPE>` rows on the thread of
               the call with the same correlation id, as the recorder's CUPTI source writes them
  spans        NVTX_EVENTS ranges (text or textId) and OSRT_API calls (`osrt:<call>`)
  steps        NVTX ranges matched by the step pattern (ProfilerStep#N by default; else loop
               annotations; else one step over the window), as for a Kineto trace
  sched        SCHED_EVENTS: a row per switch in ("R") and out (threadState, else "off_cpu"),
               each with the thread's CPU time so far (exact: the sum of its on-CPU intervals)
Every process with GPU activity is a rank (PID = globalPid >> 24 & 0xFFFFFF); its number comes
from an "MPI Rank N" thread name (nsys's MPI trace), else, for a file of one such process, from
the profiled environment's rank variables (vocabulary.RANK_ENV_VARS), else process order.
Times: nsys writes ns since the session start on one timebase for CPU and GPU; the session's
UTC start (TARGET_INFO_SESSION_START_TIME) puts them on Unix time ("realtime" host clock).

Bounded: each table is read per process with a cursor, CHUNK rows at a time, into Arrow columns
(no Python object per row beyond one chunk); rows count against bounds.MAX_TRACE_EVENTS; each
rank's tables go to disk before the next is read (IncidentWriter: nothing half-written).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import bounds, vocabulary
from ..core.errors import InputError, StallcaseError
from ..core.incident import MANIFEST, incident_dir, source
from ..core.incident_stream import IncidentWriter
from . import derived, origin
from . import nsys_schema as ns

CHUNK = 65_536  # rows per fetchmany: the only rows held as Python objects at once
_PID_SPAN = 1 << 24  # globalTid = globalPid + tid (tid in the low 24 bits)
_MAX_TIME = 1 << 62  # ns since the session start; beyond this an int64 timeline overflows
_MPI_RANK = re.compile(r"^MPI Rank (\d{1,9})$")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
# Processes read as ranks from one export: each is one pass over every event table.
MAX_PROCESSES = 4096

_TABLES = ("kernels", "memcpy", "runtime_api", "spans", "steps", "sched")

# (table, column) -> the export's table.column it is read from (an error names it: origin.py).
NSYS_FIELDS: dict[tuple[str, str], str] = {
    ("kernels", "device"): f"{ns.KERNEL}.deviceId", ("kernels", "stream"): f"{ns.KERNEL}.streamId",
    ("memcpy", "device"): f"{ns.MEMCPY}.deviceId", ("memcpy", "stream"): f"{ns.MEMCPY}.streamId",
    ("memcpy", "bytes"): f"{ns.MEMCPY}.bytes",
    **{(t, "correlation_id"): f"{src}.correlationId" for t, src in (("kernels", ns.KERNEL), ("memcpy", ns.MEMCPY), ("runtime_api", ns.RUNTIME))},
    ("steps", "end_ns"): f"{ns.NVTX}.end of its step ranges",
    ("steps", "step_id"): f"the step number in its {ns.NVTX} step range names",
}


class _Reader:
    """Streams one export's rows, per process, into Arrow columns; counts them against the cap."""

    def __init__(self, ex: ns.Export, base_ns: int):
        self.ex = ex
        self.base_ns = base_ns
        self.kept = 0

    def stream(self, table: str, select: dict[str, tuple[str, pa.DataType | None]], where: str, params=()) -> dict[str, pa.Array]:
        """SELECT the expressions of `select` ({column: (sql, type)}) FROM table WHERE where,
        CHUNK rows at a time, each chunk converted by Arrow in one pass over its tuples. Type
        None is a name: a StringIds id or the text itself, returned as `column` (the ids) and
        `column#text` (the text) for `names`."""
        fields, exprs = [], []
        for n, (e, t) in select.items():
            if t is None:
                fields += [(n, pa.int64()), (n + "#text", pa.string())]
                exprs += [f"CASE WHEN typeof({e}) = 'integer' THEN {e} END", f"CASE WHEN typeof({e}) = 'text' THEN {e} END"]
            else:
                fields.append((n, t))
                exprs.append(e)
        if not self.ex.has(table):
            return {n: pa.array([], t) for n, t in fields}
        # SQLite columns hold any type, and Arrow would truncate 1.5 to 1 in an integer column:
        # each row also carries how many of its values are not what their column must hold,
        # counted by SQLite in the same scan; a chunk with any is explained by _bad_type.
        checks = " + ".join(f"(typeof({e}) NOT IN ({_WANT[t]}, 'null'))" for e, t in select.values())
        cur = self.ex.query(table, f'SELECT {", ".join(exprs)}, {checks} FROM "{table}" WHERE {where}', params)
        parts = []
        row_type = pa.struct(fields + [("#bad", pa.int64())])
        with _no_gc():
            self._fetch_all(table, select, where, params, cur, row_type, len(fields), parts)
        whole = pa.concat_arrays(parts) if parts else pa.array([], row_type)
        return {n: whole.field(i) for i, (n, _) in enumerate(fields)}

    def _fetch_all(self, table, select, where, params, cur, row_type, nfields, parts) -> None:
        while rows := self.ex.fetch(table, cur, CHUNK):
            self.kept += len(rows)
            if self.kept > bounds.MAX_TRACE_EVENTS:
                raise InputError(self.ex.path, f"{table}: the export holds more than {bounds.MAX_TRACE_EVENTS} events (the limit for one trace)")
            try:
                chunk = pa.array(rows, row_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                chunk = None  # a value Arrow refuses outright: explained below like any other
            if chunk is None or pc.max(chunk.field(nfields)).as_py():
                self._bad_type(table, select, where, params)
            parts.append(chunk)

    def _bad_type(self, table: str, select: dict, where: str, params) -> None:
        """Name the first column holding a value of the wrong type, with how many and one of them."""
        for e, t in select.values():
            cur = self.ex.query(table, f'SELECT count(*), max(CASE WHEN typeof({e}) NOT IN ({_WANT[t]}, \'null\') THEN {e} END) '
                                       f'FROM "{table}" WHERE {where} AND typeof({e}) NOT IN ({_WANT[t]}, \'null\')', params)
            bad, v = self.ex.fetch(table, cur, 1)[0]
            if bad:
                what = {pa.int64(): "an integer", pa.string(): "text"}.get(t, "a StringIds id or text")
                raise InputError(self.ex.path, f"{table}.{_label(e)}: {bad} value(s) that are not {what}, e.g. {bounds.show(v)[:80]}")
        raise InputError(self.ex.path, f"{table}: a row whose values do not fit their columns")

    def names(self, c: dict[str, pa.Array], key: str, table: str, column: str) -> pa.Array:
        """A name column read by `stream` (type None): its text, else its id's StringIds value
        (looked up for the distinct ids only)."""
        ref, text = c.pop(key), c.pop(key + "#text")
        if len(ref) == 0 or ref.null_count == len(ref):
            return text
        uniq = pc.unique(ref.drop_null())
        lut = self.ex.strings(sorted(uniq.to_pylist()), table, column)
        ids = pa.array(list(lut), pa.int64())
        vals = pa.array(list(lut.values()), pa.string())
        return pc.coalesce(text, pc.take(vals, pc.index_in(ref, value_set=ids)))

    def times(self, table: str, start: pa.Array, end: pa.Array | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(start_ns, end_ns) on the incident's timeline; refuses missing, negative, reversed or
        overflowing times with the export's table.column."""
        cols = (("start", start),) + ((("end", end),) if end is not None else ())
        for name, a in cols:
            if a.null_count:
                raise InputError(self.ex.path, f"{table}.{name}: {a.null_count} row(s) without a time")
        s = start.to_numpy(zero_copy_only=False).astype(np.int64)
        e = end.to_numpy(zero_copy_only=False).astype(np.int64) if end is not None else s
        if s.size and (int(s.min()) < 0 or int(e.max()) > _MAX_TIME):
            raise InputError(self.ex.path, f"{table}.start: a time outside 0..2^62 ns since the session start")
        bad = int(np.count_nonzero(e < s))
        if bad:
            raise InputError(self.ex.path, f"{table}.end: {bad} row(s) end before they start")
        return s + self.base_ns, e + self.base_ns


# The SQLite storage classes each column type accepts (NULL aside).
_WANT = {pa.int64(): "'integer'", pa.string(): "'text'", None: "'integer', 'text'"}


@contextlib.contextmanager
def _no_gc():
    """The cyclic garbage collector off while rows stream: each chunk is 65,536 tuples of ints and
    strings (no cycles), freed with the chunk, but their allocation alone triggers collections
    that walk every live object (measured: 30-50% of a 1M-row read)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _label(expr: str) -> str:
    m = re.search(r'"(\w+)"', expr)
    return m.group(1) if m else expr


def _where(ex: ns.Export, table: str, gpid: int) -> tuple[str, tuple]:
    if "globalPid" in ex.columns(table):
        return '"globalPid" = ?', (gpid,)
    if "globalTid" in ex.columns(table):
        return '"globalTid" >= ? AND "globalTid" < ?', (gpid, gpid + _PID_SPAN)
    return "1", ()


def _kernels(rd: _Reader, gpid: int) -> pa.Table:
    ex, t = rd.ex, ns.KERNEL
    name = f'coalesce({ex.col(t, "demangledName")}, {ex.col(t, "shortName")}, {ex.col(t, "mangledName")})'
    c = rd.stream(t, {
        "start": ('"start"', pa.int64()), "end": (ex.col(t, "end"), pa.int64()), "device": (ex.col(t, "deviceId", "0"), pa.int64()),
        "stream": (ex.col(t, "streamId", "0"), pa.int64()), "correlation_id": (ex.col(t, "correlationId"), pa.int64()),
        "name": (name, None),
        **{f"{d}_{a}": (ex.col(t, f"{d}{a.upper()}"), pa.int64()) for d in ("grid", "block") for a in "xyz"},
    }, *_where(ex, t, gpid))
    start, end = rd.times(t, c.pop("start"), c.pop("end"))
    names = rd.names(c, "name", t, "demangledName")
    if names.null_count:
        raise InputError(ex.path, f"{t}.demangledName: {names.null_count} kernel(s) without a name in StringIds")
    return pa.table({"name": names, **c, "start_ns": start, "end_ns": end})


def _lookup(codes: pa.Array, words: dict[int, str | None]) -> pa.Array:
    """Integer codes -> their words (null for a null code or one not listed)."""
    keys = [k for k, v in words.items() if v is not None]
    return pc.take(pa.array([words[k] for k in keys], pa.string()), pc.index_in(codes, value_set=pa.array(keys, pa.int64())))


def _copies(rd: _Reader, gpid: int, kinds: dict[int, str], mem: dict[int, str]) -> pa.Table:
    """Copies and memsets in one table (the memcpy table), with kinds and memory kinds."""
    ex, out = rd.ex, []
    for t, is_set in ((ns.MEMCPY, False), (ns.MEMSET, True)):
        if not ex.has(t):
            continue
        sel = {"start": ('"start"', pa.int64()), "end": (ex.col(t, "end"), pa.int64()),
               "device": (ex.col(t, "deviceId", "0"), pa.int64()), "stream": (ex.col(t, "streamId", "0"), pa.int64()),
               "bytes": (ex.col(t, "bytes"), pa.int64()), "correlation_id": (ex.col(t, "correlationId"), pa.int64())}
        if is_set:
            sel["dst"] = (ex.col(t, "memKind"), pa.int64())
        else:
            sel.update(kind=(ex.col(t, "copyKind"), pa.int64()), src=(ex.col(t, "srcKind"), pa.int64()),
                       dst=(ex.col(t, "dstKind"), pa.int64()))
        c = rd.stream(t, sel, *_where(ex, t, gpid))
        start, end = rd.times(t, c.pop("start"), c.pop("end"))
        n = len(start)
        kind = pa.array(["memset"] * n, pa.string()) if is_set else pc.fill_null(_lookup(c.pop("kind"), kinds), "unknown")
        src = pa.nulls(n, pa.string()) if is_set else _lookup(c.pop("src"), mem)
        out.append(pa.table({**c, "kind": kind, "src_kind": src, "dst_kind": _lookup(c.pop("dst"), mem),
                             "start_ns": start, "end_ns": end}))
    if not out:
        return pa.table({"device": pa.array([], pa.int64()), "stream": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64()),
                         "correlation_id": pa.array([], pa.int64()), "kind": pa.array([], pa.string()),
                         "src_kind": pa.array([], pa.string()), "dst_kind": pa.array([], pa.string()),
                         "start_ns": pa.array([], pa.int64()), "end_ns": pa.array([], pa.int64())})
    return pa.concat_tables(out)


def _api(rd: _Reader, gpid: int, classes: list[int], sync_types: dict[int, str]) -> pa.Table:
    """CUDA runtime and driver calls, then the synchronization records on the calling thread."""
    ex, t = rd.ex, ns.RUNTIME
    where, params = _where(ex, t, gpid)
    if "eventClass" in ex.columns(t) and classes:
        where += f' AND "eventClass" IN ({",".join(str(int(c)) for c in classes)})'
    c = rd.stream(t, {"start": ('"start"', pa.int64()), "end": (ex.col(t, "end"), pa.int64()),
                      "tid": (ex.col(t, "globalTid", "0"), pa.int64()), "correlation_id": (ex.col(t, "correlationId"), pa.int64()),
                      "name": (f'coalesce({ex.col(t, "nameId")}, {ex.col(t, "name")})', None)}, where, params)
    start, end = rd.times(t, c["start"], c["end"])
    names = rd.names(c, "name", t, "nameId")
    if names.null_count:
        raise InputError(ex.path, f"{t}.nameId: {names.null_count} call(s) without a name in StringIds")
    enc = pc.dictionary_encode(names)  # fold suffixes once per distinct name
    names = pc.take(pa.array([vocabulary.base_name(n) for n in enc.dictionary.to_pylist()], pa.string()), enc.indices)
    tid = np.bitwise_and(c["tid"].to_numpy(zero_copy_only=False).astype(np.int64), _PID_SPAN - 1)
    calls = pa.table({"name": names, "thread_id": tid, "correlation_id": c["correlation_id"], "start_ns": start, "end_ns": end})
    if not ex.has(ns.SYNC):
        return calls
    s = rd.stream(ns.SYNC, {"start": ('"start"', pa.int64()), "end": (ex.col(ns.SYNC, "end"), pa.int64()),
                            "correlation_id": (ex.col(ns.SYNC, "correlationId"), pa.int64()),
                            "type": (ex.col(ns.SYNC, "syncType"), pa.int64())}, *_where(ex, ns.SYNC, gpid))
    if len(s["start"]) == 0:
        return calls
    s_start, s_end = rd.times(ns.SYNC, s["start"], s["end"])
    # The thread is that of the call with the same correlation id (the record names no thread);
    # a record no call matches is left out, as the recorder leaves it out.
    corr = pc.fill_null(s["correlation_id"], -1).to_numpy().astype(np.int64)
    c_corr = pc.fill_null(calls["correlation_id"], -2).to_numpy().astype(np.int64)
    order = np.argsort(c_corr, kind="stable")
    pos = np.minimum(np.searchsorted(c_corr[order], corr), max(order.size - 1, 0))
    ok = (order.size > 0) & (c_corr[order][pos] == corr) if order.size else np.zeros(corr.size, bool)
    s_tid = tid[order][pos] if order.size else np.zeros(corr.size, np.int64)
    words = {k: f"cuda_sync:{v}" for k, v in sync_types.items()}
    sync = pa.table({"name": pc.fill_null(_lookup(s["type"], words), "cuda_sync:UNKNOWN"), "thread_id": s_tid,
                     "correlation_id": s["correlation_id"], "start_ns": s_start, "end_ns": s_end}).filter(pa.array(ok))
    return pa.concat_tables([calls, sync])


def _spans(rd: _Reader, gpid: int) -> pa.Table:
    """NVTX ranges (their text, or their textId's string) and OS runtime calls, per thread."""
    ex, parts = rd.ex, []
    t = ns.NVTX
    if ex.has(t):
        where, params = _where(ex, t, gpid)
        where += ' AND "end" IS NOT NULL'
        if "eventType" in ex.columns(t):
            where += f' AND "eventType" IN ({",".join(map(str, ns.NVTX_RANGE_TYPES))})'
        c = rd.stream(t, {"start": ('"start"', pa.int64()), "end": ('"end"', pa.int64()),
                          "tid": (ex.col(t, "globalTid", "0"), pa.int64()),
                          "text": (ex.col(t, "text"), pa.string()), "text_id": (ex.col(t, "textId"), None)}, where, params)
        start, end = rd.times(t, c["start"], c["end"])
        name = pc.coalesce(c["text"], rd.names(c, "text_id", t, "textId"))
        keep = pc.is_valid(name)  # a range with no name (neither column) names nothing to read
        parts.append(pa.table({"name": name, "thread_id": c["tid"], "start_ns": start, "end_ns": end}).filter(keep))
    t = ns.OSRT
    if ex.has(t):
        c = rd.stream(t, {"start": ('"start"', pa.int64()), "end": (ex.col(t, "end"), pa.int64()),
                          "tid": (ex.col(t, "globalTid", "0"), pa.int64()), "name": (ex.col(t, "nameId"), None)}, *_where(ex, t, gpid))
        start, end = rd.times(t, c["start"], c["end"])
        name = pc.binary_join_element_wise("osrt:", rd.names(c, "name", t, "nameId"), "")
        parts.append(pa.table({"name": name, "thread_id": c["tid"], "start_ns": start, "end_ns": end}).filter(pc.is_valid(name)))
    if not parts:
        return pa.table({"name": pa.array([], pa.string()), "thread_id": pa.array([], pa.int64()),
                         "start_ns": pa.array([], pa.int64()), "end_ns": pa.array([], pa.int64())})
    out = pa.concat_tables(parts)
    tid = np.bitwise_and(out["thread_id"].to_numpy(zero_copy_only=False).astype(np.int64), _PID_SPAN - 1)
    return out.set_column(1, "thread_id", pa.array(tid))


def _sched(rd: _Reader, gpid: int, thread_names: dict[int, str]) -> pa.Table:
    """Context switches -> the sched table: state after each switch and the thread's CPU time so
    far (the sum of its on-CPU intervals up to that switch; run-queue wait is not recorded)."""
    ex, t = rd.ex, ns.SCHED
    c = rd.stream(t, {"start": ('"start"', pa.int64()), "in": (ex.col(t, "isSchedIn"), pa.int64()),
                      "tid": (ex.col(t, "globalTid", "0"), pa.int64()), "state": (ex.col(t, "threadState"), pa.int64())},
                  *_where(ex, t, gpid))
    ts, _ = rd.times(t, c["start"])
    gtid = c["tid"].to_numpy(zero_copy_only=False).astype(np.int64)
    if c["in"].null_count:
        raise InputError(ex.path, f"{t}.isSchedIn: {c['in'].null_count} switch(es) without a direction")
    is_in = c["in"].to_numpy(zero_copy_only=False).astype(bool)
    order = np.lexsort((ts, gtid))
    ts, gtid, is_in = ts[order], gtid[order], is_in[order]
    state_code = pc.fill_null(c["state"], 0).to_numpy().astype(np.int64)[order]
    first = np.ones(ts.size, bool)
    first[1:] = gtid[1:] != gtid[:-1]
    prev_in = np.roll(is_in, 1)
    prev_in[first] = False
    inc = np.where(~is_in & prev_in, ts - np.roll(ts, 1), 0)
    cum = np.cumsum(inc)
    cpu = cum - np.maximum.accumulate(np.where(first, cum - inc, 0))  # cumsum restarted per thread
    codes, which = np.unique(state_code, return_inverse=True)  # a few distinct states
    words = np.array([ns.THREAD_STATES.get(int(k), "off_cpu") for k in codes.tolist()] or ["off_cpu"], object)
    state = np.where(is_in, "R", words[which] if ts.size else np.zeros(0, object))
    tid = np.bitwise_and(gtid, _PID_SPAN - 1)
    tname = pa.array([thread_names.get(int(g)) for g in np.unique(gtid)], pa.string())
    tname = pc.take(tname, pa.array(np.searchsorted(np.unique(gtid), gtid))) if ts.size else pa.array([], pa.string())
    timeslices = np.cumsum(is_in) - np.maximum.accumulate(np.where(first, np.cumsum(is_in) - is_in, 0))
    return pa.table({"ts_ns": ts, "thread_id": tid, "thread_name": tname, "state": pa.array(state.astype(str), pa.string()),
                     "cpu_time_ns": cpu.astype(np.int64), "runqueue_wait_ns": pa.nulls(ts.size, pa.int64()),
                     "timeslices": timeslices.astype(np.int64)})


def _processes(ex: ns.Export) -> list[int]:
    """globalPids of the processes that are ranks: those with GPU activity, else those with CUDA
    calls, else those with NVTX ranges (a CPU-only profile)."""
    for tables in ((ns.KERNEL, ns.MEMCPY, ns.MEMSET), (ns.RUNTIME,), (ns.NVTX,)):
        found: set[int] = set()
        for t in tables:
            if "globalPid" in ex.columns(t):
                sql = f'SELECT DISTINCT "globalPid" FROM "{t}"'
            elif "globalTid" in ex.columns(t):
                sql = f'SELECT DISTINCT ("globalTid" >> 24) << 24 FROM "{t}"'
            else:
                continue
            for (g,) in ex.fetch(t, ex.query(t, sql), MAX_PROCESSES + 1):
                if not isinstance(g, int) or g < 0:
                    raise InputError(ex.path, f"{t}.globalPid: {bounds.show(g)} is not a process id")
                found.add(g)
            if len(found) > MAX_PROCESSES:
                raise InputError(ex.path, f"{t}: more than {MAX_PROCESSES} processes (the limit for one export; each is read on its own)")
        if found:
            return sorted(found, key=lambda g: ((g >> 24) & 0xFFFFFF, g))
    raise InputError(ex.path, f"{ns.KERNEL}: the export holds no CUDA kernels, copies, calls or NVTX ranges")


def _thread_names(ex: ns.Export) -> dict[int, str]:
    rows = ex.text_rows("ThreadNames", "SELECT t.globalTid, CAST(s.value AS BLOB) FROM ThreadNames t "
                                       "LEFT JOIN StringIds s ON s.id = t.nameId") if ex.has("StringIds") else []
    return {int(g): str(n) for g, n in rows if isinstance(g, int) and n is not None}


def _environment(ex: ns.Export) -> dict[str, str]:
    """The profiled session's environment (TARGET_INFO_SYSTEM_ENV's DeviceEnvironment: NUL-separated)."""
    rows = ex.text_rows("TARGET_INFO_SYSTEM_ENV", "SELECT CAST(value AS BLOB) FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'")
    env = {}
    for (v,) in rows:
        for item in str(v or "").split("\x00"):
            k, eq, val = item.partition("=")
            if eq and k in vocabulary.RANK_ENV_VARS:
                env[k] = val
    return env


def _ranks(ex: ns.Export, gpids: list[int], threads: dict[int, str], taken: set[int]) -> list[tuple[int, str]]:
    """(rank, where it came from) per process, in order."""
    out = []
    env = _environment(ex) if len(gpids) == 1 else {}
    for i, g in enumerate(gpids):
        mpi = sorted({int(m.group(1)) for t, n in threads.items() if g <= t < g + _PID_SPAN and (m := _MPI_RANK.match(n))})
        if len(mpi) == 1:
            out.append((mpi[0], "ThreadNames: MPI Rank N"))
            continue
        var = next((k for k in vocabulary.RANK_ENV_VARS if k in env), None)
        if var is not None:
            if not (env[var].isascii() and env[var].isdigit()):
                raise InputError(ex.path, f"TARGET_INFO_SYSTEM_ENV.DeviceEnvironment: {var}={env[var][:40]!r} is not a rank")
            out.append((bounds.rank(int(env[var]), var, ex.path), f"environment: {var}"))
            continue
        k = 0
        while k in taken or k in {r for r, _ in out}:
            k += 1
        out.append((k, "process order"))
    return out


def _provenance(ex: ns.Export, procs: list[dict]) -> dict:
    meta = ex.metadata()
    gpus = ex.text_rows("TARGET_INFO_GPU", "SELECT " + ", ".join(
        f'{ex.col("TARGET_INFO_GPU", c)}' if c not in ("name", "uuid", "busLocation", "chipName") else
        f'CAST({ex.col("TARGET_INFO_GPU", c)} AS BLOB)' for c in _GPU_COLS) + " FROM TARGET_INFO_GPU")
    start = ex.text_rows("TARGET_INFO_SESSION_START_TIME", f'SELECT {ex.col("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")} '
                                                         "FROM TARGET_INFO_SESSION_START_TIME")
    host = ex.text_rows("TARGET_INFO_SYSTEM_ENV", "SELECT CAST(value AS BLOB) FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")
    return {
        "file": str(ex.path),
        "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
        "export_schema_version": meta.get("EXPORT_SCHEMA_VERSION"),
        "metadata_table": meta.get("table"),
        "session_start_utc_ns": start[0][0] if start else None,
        "hostname": host[0][0] if host else None,
        "gpus": [dict(zip(_GPU_COLS, r)) for r in gpus],
        "processes": procs,
        "tables_read": sorted(t for t in (ns.KERNEL, ns.MEMCPY, ns.MEMSET, ns.RUNTIME, ns.SYNC, ns.NVTX, ns.OSRT, ns.SCHED) if ex.has(t)),
        "cuda_event_records": _count(ex, ns.CUDA_EVENT),
    }


_GPU_COLS = ("id", "name", "busLocation", "uuid", "chipName", "computeMajor", "computeMinor", "smCount", "clockRate", "totalMemory")


def _count(ex: ns.Export, table: str) -> int | None:
    return ex.fetch(table, ex.query(table, f'SELECT count(*) FROM "{table}"'), 1)[0][0] if ex.has(table) else None


def _base_ns(ex: ns.Export) -> int | None:
    """Unix ns of the session start: the exported times are ns since then."""
    t = "TARGET_INFO_SESSION_START_TIME"
    if "utcEpochNs" not in ex.columns(t):
        return None
    rows = ex.fetch(t, ex.query(t, f'SELECT "utcEpochNs" FROM "{t}"'), 2)
    if not rows:
        return None
    return bounds.integer(rows[0][0], f"{t}.utcEpochNs", ex.path, lo=0, hi=_MAX_TIME)


def _rank_tables(ex: ns.Export, rd: _Reader, gpid: int, rank: int, enums: dict, threads: dict, step_rx) -> tuple[dict, str]:
    out = {"kernels": _kernels(rd, gpid), "memcpy": _copies(rd, gpid, enums["kinds"], enums["mem"]),
           "runtime_api": _api(rd, gpid, enums["classes"], enums["sync"]), "spans": _spans(rd, gpid),
           "sched": _sched(rd, gpid, threads) if ex.has(ns.SCHED) else None}
    for name, t in list(out.items()):
        if t is None:
            continue
        t = t.append_column("rank", pa.array(np.full(t.num_rows, rank, np.int32)))
        key = "ts_ns" if name == "sched" else "start_ns"
        out[name] = t if t.num_rows < 2 or bool(np.all(np.diff(t[key].to_numpy()) >= 0)) else t.sort_by([(key, "ascending")])
    m = out["memcpy"]
    out["memcpy"] = m.append_column("is_async", derived.is_async(m, out["runtime_api"]))
    sched = out.pop("sched")  # not an interval table: the steps' window is read from the others
    basis = derived.derive(out, rank, step_rx, ex.path)
    out["sched"] = sched
    return out, basis


def _enums(ex: ns.Export) -> dict:
    words = {v.upper(): v for v in vocabulary.CUPTI_MEMCPY_KINDS.values()}
    kinds = {k: words.get(v.removeprefix("UVM_"), "unknown") for k, v in ex.enum(ns.MEMCPY_ENUM).items()}
    mem = {k: ns.MEM_WORDS.get(v) for k, v in ex.enum(ns.MEM_ENUM).items()}
    classes = list(ns.API_CLASSES)
    if ex.has("ENUM_NSYS_EVENT_CLASS"):
        cls = ex.enum(("ENUM_NSYS_EVENT_CLASS", "TRACE_PROCESS_EVENT_", {}))
        classes = [k for k, v in cls.items() if v in ("CUDA_RUNTIME", "CUDA_DRIVER")] or classes
    return {"kinds": kinds, "mem": mem, "classes": classes, "sync": ex.enum(ns.SYNC_ENUM)}


def default_incident_id(path: str | os.PathLike) -> str:
    """The incident id `stallcase import nsys` uses without --incident: the file name without its
    suffix, in the characters an id allows (run.nsys-rep -> run, rank 0.sqlite -> rank-0)."""
    name = Path(path).name
    for suffix in (".sqlite", ".db", *REPORT_SUFFIXES):
        name = name.removesuffix(suffix)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip("._-")[: bounds.MAX_ID_LEN]
    return stem.replace("..", "-") or "nsys-import"


def import_nsys(files, *, incident_id: str, incidents_dir: str | os.PathLike = "incidents",
                step_pattern: str | None = None) -> Path:
    """Import Nsight Systems SQLite exports (one or more: a report per rank, or one report of
    several processes) into `<incidents_dir>/<incident_id>/`; returns that path. A `.nsys-rep`
    is exported first by the `nsys` on the PATH."""
    files = [Path(f) for f in files]
    if not files:
        raise InputError("nsys", "no export files given")
    bounds.unique_files(files)
    out_dir = incident_dir(incidents_dir, incident_id)
    if (out_dir / MANIFEST).exists():
        raise StallcaseError(out_dir, "incident already exists: choose another --incident or remove it")
    step_rx = derived.step_regex(step_pattern)
    ranks: list[int] = []
    artifacts, bases, provenance, unix_known, seen = [], set(), [], True, {}
    with tempfile.TemporaryDirectory(prefix="stallcase-nsys-") as tmp, IncidentWriter(out_dir, _TABLES) as w:
        for path in files:
            db_path = ns.export_report(path, Path(tmp)) if path.suffix in REPORT_SUFFIXES else path
            ex = ns.Export(db_path)
            try:
                base = _base_ns(ex)
                unix_known &= base is not None
                rd = _Reader(ex, base or 0)
                enums, threads = _enums(ex), _thread_names(ex)
                gpids = _processes(ex)
                procs = []
                for gpid, (rank, how) in zip(gpids, _ranks(ex, gpids, threads, set(ranks))):
                    if rank in ranks:
                        raise InputError(path, f"rank {rank} ({how}) appears in more than one process or file")
                    ranks.append(rank)
                    done, basis = _rank_tables(ex, rd, gpid, rank, enums, threads, step_rx)
                    bases.add(basis)
                    for name in _TABLES:
                        t = done.pop(name)
                        if t is not None:  # checked here, an error names this export and its column
                            w.add(name, origin.checked(name, t, path, NSYS_FIELDS))
                    del done
                    procs.append({"pid": (gpid >> 24) & 0xFFFFFF, "rank": rank, "rank_from": how,
                                  "name": _process_name(ex, gpid)})
                prov = _provenance(ex, procs)
                prov["file"] = str(path.resolve())
                provenance.append(prov)
                seen.update({t: seen.get(t, False) or ex.has(t) for t in (ns.RUNTIME, ns.NVTX, ns.OSRT, ns.SCHED, ns.SYNC)})
            finally:
                ex.close()
            artifacts.append({"role": "input", "path": str(path.resolve()), "relpath": None,
                              "digest": derived.hash_streaming(path), "size": path.stat().st_size})
        if w.rows["steps"] == 0:
            raise InputError(files[0], f"no NVTX ranges match {step_rx.pattern!r}: pass --step-pattern with one group capturing the step number")
        w.finish(_manifest(incident_id, w.rows, w.window(), ranks, unix_known, artifacts, step_rx.pattern,
                           sorted(bases), provenance, seen))
    return out_dir


def _process_name(ex: ns.Export, gpid: int) -> str | None:
    rows = ex.text_rows("PROCESSES", f"SELECT CAST(name AS BLOB) FROM PROCESSES WHERE globalPid = {int(gpid)}")
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


def _manifest(incident_id: str, rows: dict[str, int], window: dict | None, ranks: list[int], unix_known: bool,
              artifacts: list, pattern: str, bases: list[str], provenance: list[dict], seen: dict[str, bool]) -> dict:
    gpu = rows["kernels"] + rows["memcpy"]
    return {
        "incident_id": incident_id,
        "reason": "import",
        "producer": "nsys-import",
        "clock": {"host": "realtime", "unix_minus_host_ns": 0 if unix_known else None},
        "window": window,
        "ranks": sorted(ranks),
        "sources": {
            "kernels": source("observed") if gpu else source("not_observed", f"the export's {ns.KERNEL} and copy tables are empty for these processes"),
            "memcpy": source("observed") if gpu else source("not_observed", "the export has no GPU activity"),
            "runtime_api": source("observed", None, synchronization=seen.get(ns.SYNC, False)) if rows["runtime_api"] else
            source("not_observed", f"the export has no {ns.RUNTIME} rows (profile with --trace=cuda)"),
            "spans": source("observed", None, nvtx=seen.get(ns.NVTX, False), osrt=seen.get(ns.OSRT, False)) if rows["spans"] else
            source("not_observed", f"the export has no {ns.NVTX} ranges or {ns.OSRT} calls (profile with --trace=nvtx,osrt)"),
            "steps": source("observed", None, pattern=pattern, basis="; ".join(derived.BASIS[b] for b in bases)),
            "sched": source("observed", None, runqueue_wait="not recorded by nsys") if rows["sched"] else
            source("not_observed", f"the export has no {ns.SCHED} rows (profile with --sample=process-tree or --cpuctxsw)"),
            "nvml": source("not_observed", "nsys exports carry no NVML samples"),
            "clock_sync": source("not_observed", "nsys puts GPU times on the CPU's timebase itself; no calibration rows"),
            "collectives": source("not_observed", "nsys exports have no per-collective sequence ids; NCCL kernels are in the kernels table"),
        },
        "provenance": {"nsys": provenance},
        "artifacts": artifacts,
        "trigger": None,
        "workload": None,
    }
