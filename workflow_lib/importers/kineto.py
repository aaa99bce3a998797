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

import blake3

from ..core import bounds, vocabulary
from ..core.errors import InputError, StallcaseError
from ..core.patterns import compile_pattern
from ..core.incident import MANIFEST, incident_dir, source
from ..core.incident_stream import IncidentWriter
from . import origin
from . import kineto_events as ke
from .json_stream import read_trace

DEFAULT_STEP_PATTERN = r"ProfilerStep#(\d+)"
# Without ProfilerStep#N (profiled without schedule/step()): annotations people write
# around their loop body (record_function("train_step_12"), "iteration 3", "step#4").
FALLBACK_STEP_PATTERN = r"(?i)(?<![A-Za-z0-9])(?:train_step|training_step|step|iteration|iter)[ _#:-]?(\d+)(?![A-Za-z0-9])"

# Calls that block the calling host thread until the GPU catches up: one definition for every
# stage (workflow_lib/core/vocabulary.py: CUDA runtime, driver and HIP; .item() shows up as
# cudaMemcpyAsync + cudaStreamSynchronize, the second is the sync).
_COPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
# Kineto names the memory on each side: "Memcpy HtoD (Pageable -> Device)", "Memset (Device)".
_COPY_SIDES = re.compile(r"\((\w+)\s*->\s*(\w+)\)")
_SET_SIDE = re.compile(r"^Memset \((\w+)\)")
_MEMORY_WORDS = {"pageable": "pageable", "pinned": "pinned", "device": "device", "managed": "managed", "array": "array"}


def _sides(name: str) -> tuple[str | None, str | None]:
    """(src_kind, dst_kind) from a Kineto copy/memset name; None where it does not say."""
    if (mm := _COPY_SIDES.search(name)) is not None:
        return _MEMORY_WORDS.get(mm.group(1).lower()), _MEMORY_WORDS.get(mm.group(2).lower())
    if (mm := _SET_SIDE.search(name)) is not None:
        return None, _MEMORY_WORDS.get(mm.group(1).lower())
    return None, None


def _is_async(m: pa.Table, r: pa.Table) -> pa.Array:
    """Per copy: was its issuing call asynchronous (cudaMemcpyAsync) or not (cudaMemcpy)?
    Joined by correlation id; null where no call matched."""
    out = np.full(m.num_rows, -1, np.int8)
    if m.num_rows and r.num_rows:
        enc = pc.dictionary_encode(r["name"]).combine_chunks()
        flags = np.array([1 if "async" in n.lower() else (0 if re.search(r"mem(cpy|set)", n, re.I) else -1)
                          for n in enc.dictionary.to_pylist()], np.int8)  # distinct names only
        per_call = flags[enc.indices.to_numpy(zero_copy_only=False)]
        r_corr = pc.fill_null(r["correlation_id"], -1).to_numpy().astype(np.int64)
        order = np.argsort(r_corr, kind="stable")
        m_corr = pc.fill_null(m["correlation_id"], -1).to_numpy().astype(np.int64)
        pos = np.minimum(np.searchsorted(r_corr[order], m_corr), order.size - 1)
        ok = (m_corr >= 0) & (r_corr[order][pos] == m_corr)
        out[ok] = per_call[order][pos][ok]
    return pa.array([None if v < 0 else bool(v) for v in out.tolist()], pa.bool_())


def _hash_streaming(path: Path) -> str:
    """blake3 of the input read in 1 MiB blocks (cas.hash_file mmaps large files, which
    would count the whole trace in the importer's resident memory)."""
    h = blake3.blake3()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _read_one(path: Path) -> tuple[dict[str, list[pa.Table]], dict]:
    """Stream one trace: each piece is split into per-table columns at once, so only the
    final columns of earlier pieces stay in memory (times still in Kineto us)."""
    parts: dict[str, list[pa.Table]] = {}
    kept = [0]

    def on_piece(ev: ke.Events) -> None:
        kept[0] += ev.kept
        if kept[0] > bounds.MAX_TRACE_EVENTS:  # memory is a multiple of the kept events
            raise InputError(path, f"trace holds more than {bounds.MAX_TRACE_EVENTS} kept events (the limit for one trace)")
        for name, t in _split(ev).items():
            if t.num_rows:
                parts.setdefault(name, []).append(t)

    meta = read_trace(path, on_piece, parse=ke.parse_piece)
    return parts, meta


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
        return bounds.rank(info["rank"], "distributedInfo.rank", path)
    return position


def _split(ev: ke.Events) -> dict[str, pa.Table]:
    """One piece's events -> per-table columns, times as Kineto us (ts_us, dur_us). Each column
    is filtered by its table's mask, never the nested event struct as a whole (that filter
    cost more than the parse's conversion)."""
    arr = ev.arr
    args = arr.field("args")

    def cols(m, *names):
        return [arr.field(n).filter(m) for n in names]

    def arg(m, *names):
        return [args.field(n).filter(m) for n in names]

    out = {}
    m = ev.mask(ke.KERNEL_T)
    name, pid, tid, ts, dur = cols(m, "name", "pid", "tid", "ts", "dur")
    device, stream, corr, grid, block = arg(m, "device", "stream", "correlation", "grid", "block")
    out["kernels"] = pa.table({
        "name": name, "device": pc.coalesce(device, pid, 0), "stream": pc.coalesce(stream, tid, 0), "correlation_id": corr,
        "ts_us": ts, "dur_us": pc.fill_null(dur, 0.0),
        **dict(zip(("grid_x", "grid_y", "grid_z"), _dims(grid))), **dict(zip(("block_x", "block_y", "block_z"), _dims(block))),
    })
    m = ev.mask(ke.COPY_T)
    name, pid, tid, ts, dur = cols(m, "name", "pid", "tid", "ts", "dur")
    device, stream, nbytes, corr = arg(m, "device", "stream", "bytes", "correlation")
    out["memcpy"] = pa.table({
        "name": name, "is_set": pa.array(ev.is_set[ev.table == ke.COPY_T]),
        "device": pc.coalesce(device, pid, 0), "stream": pc.coalesce(stream, tid, 0), "bytes": nbytes,
        "correlation_id": corr, "ts_us": ts, "dur_us": pc.fill_null(dur, 0.0),
    })
    m = ev.mask(ke.RUNTIME_T)
    name, tid, ts, dur = cols(m, "name", "tid", "ts", "dur")
    out["runtime_api"] = pa.table({
        "name": name, "thread_id": pc.fill_null(tid, 0), "correlation_id": arg(m, "correlation")[0], "ts_us": ts,
        "dur_us": pc.fill_null(dur, 0.0),
    })
    m = ev.mask(ke.HOST_T)
    name, tid, ts, dur = cols(m, "name", "tid", "ts", "dur")
    out["spans"] = pa.table({"name": name, "thread_id": pc.fill_null(tid, 0), "ts_us": ts, "dur_us": pc.fill_null(dur, 0.0)})
    return out


def _dims(lists: pa.ListArray) -> list[pa.Array]:
    """The first three elements of each list (grid or block x, y, z): null past a list's end,
    for a null list, or where the element is null. One take per dimension."""
    start = lists.offsets.to_numpy()
    length = np.diff(start)
    valid = lists.is_valid().to_numpy(zero_copy_only=False)
    return [lists.values.take(pa.array(start[:-1] + i, mask=~(valid & (length > i)))) for i in range(3)]


# Largest ns value an int64 timeline holds, with room for the duration added to it.
_MAX_NS = float(2**63 - 2**11)


def _finish(parts: dict[str, list[pa.Table]], rank: int, base_ns: int, shift_us: float, step_rx: re.Pattern,
            where=None) -> dict[str, pa.Table]:
    """Concatenate a rank's pieces (no copy), put times on the ns timeline, add derived columns."""
    out = {}
    for name in ("kernels", "memcpy", "runtime_api", "spans"):
        pieces = parts.get(name)
        t = pa.concat_tables(pieces) if pieces else _split(ke.classify(pa.array([], type=ke.EVENT)))[name]
        ts = t["ts_us"].to_numpy()
        dur = t["dur_us"].to_numpy()
        bounds.no_negative(dur, "dur", where, f"{name} event")
        # Checked before the int64 cast: NaN, infinity or out-of-range floats would cast to garbage.
        end_f = base_ns + (ts - shift_us) * 1000.0 + dur * 1000.0
        bad = int(np.count_nonzero(~np.isfinite(end_f) | (end_f >= _MAX_NS)))
        if bad:
            raise InputError(where, f"{bad} {name} event(s) with a ts or dur that is not a finite time on an int64 ns timeline")
        start = base_ns + np.rint((ts - shift_us) * 1000.0).astype(np.int64)
        neg = int(np.count_nonzero(start < 0))
        if neg:
            raise InputError(where, f"{neg} {name} event(s) before time 0 (negative ts with baseTimeNanoseconds {base_ns})")
        end = start + np.rint(dur * 1000.0).astype(np.int64)
        t = t.drop_columns(["ts_us", "dur_us"]).append_column("start_ns", pa.array(start)).append_column("end_ns", pa.array(end))
        t = t.append_column("rank", pa.array(np.full(t.num_rows, rank, np.int32)))
        # Sorted by start on disk, so readers can binary-search without sorting a copy.
        out[name] = t if t.num_rows == 0 or bool(np.all(np.diff(start) >= 0)) else t.sort_by([("start_ns", "ascending")])
    m = out["memcpy"]
    if m.num_rows:
        enc = pc.dictionary_encode(m["name"]).combine_chunks()
        kinds = [(mm.group(1) if (mm := _COPY_KIND.search(s)) else "unknown") for s in enc.dictionary.to_pylist()]
        kind = pc.take(pa.array(kinds, pa.string()), enc.indices)
        kind = pc.if_else(m["is_set"], "memset", kind)
        sides = [_sides(n) for n in enc.dictionary.to_pylist()]  # distinct names only
        src = pc.take(pa.array([a for a, _ in sides], pa.string()), enc.indices)
        dst = pc.take(pa.array([b for _, b in sides], pa.string()), enc.indices)
    else:
        kind = src = dst = pa.array([], pa.string())
    out["memcpy"] = (m.drop_columns(["name", "is_set"]).append_column("kind", kind).append_column("src_kind", src)
                     .append_column("dst_kind", dst).append_column("is_async", _is_async(m, out["runtime_api"])))
    r = out["runtime_api"]
    out["runtime_api"] = r.append_column("is_sync", pa.array(vocabulary.per_name(r["name"], vocabulary.is_sync_call)))
    sp = out["spans"]
    tid = sp["thread_id"].to_numpy()
    depth = _depths(tid, sp["start_ns"].to_numpy(), sp["end_ns"].to_numpy()) if sp.num_rows else np.zeros(0, np.int64)
    out["spans"] = sp.append_column("depth", pa.array(depth.astype(np.int32)))
    steps, basis = _steps(out["spans"], step_rx, where), "pattern"
    if steps.num_rows == 0 and step_rx.pattern == DEFAULT_STEP_PATTERN:
        _refuse_malformed_profiler_steps(out["spans"], where)
    if steps.num_rows == 0 and step_rx.pattern == DEFAULT_STEP_PATTERN:
        steps, basis = _steps(out["spans"], re.compile(FALLBACK_STEP_PATTERN), where), "annotation"
    if steps.num_rows == 0 and step_rx.pattern == DEFAULT_STEP_PATTERN:
        steps, basis = _window_step(out, rank), "window"
    out["steps"] = _with_launched_gpu_work(steps, out)
    out["_basis"] = basis
    return out


def _refuse_malformed_profiler_steps(spans: pa.Table, where) -> None:
    """A `ProfilerStep#` span whose id is not an ASCII decimal (e.g. `ProfilerStep#²`) is a
    damaged step annotation, not a trace without steps: refuse it rather than fall back."""
    if not spans.num_rows:
        return
    bad = pc.filter(spans["name"], pc.starts_with(spans["name"], "ProfilerStep#"))
    if len(bad):
        raise InputError(where, f"no step spans match {DEFAULT_STEP_PATTERN!r}: {str(bad[0].as_py())[:80]!r} names a step "
                                "whose id is not an ASCII decimal number")


def _window_step(out: dict[str, pa.Table], rank: int) -> pa.Table:
    """No step annotations at all: one step over the trace window (every event), owned by the
    thread with the most runtime calls (else the most host spans)."""
    starts = [int(pc.min(t["start_ns"]).as_py()) for t in out.values() if t.num_rows]
    ends = [int(pc.max(t["end_ns"]).as_py()) for t in out.values() if t.num_rows]
    if not starts:
        return _steps(out["spans"], re.compile(DEFAULT_STEP_PATTERN))
    src = out["runtime_api"] if out["runtime_api"].num_rows else out["spans"]
    if src.num_rows:
        tids, counts = np.unique(src["thread_id"].to_numpy(), return_counts=True)
        tid = int(tids[np.argmax(counts)])
    else:
        tid = 0
    return pa.table({"step_id": pa.array([0], pa.int64()), "thread_id": pa.array([tid], pa.int64()),
                     "start_ns": pa.array([min(starts)], pa.int64()), "end_ns": pa.array([max(ends)], pa.int64()),
                     "rank": pa.array([rank], pa.int32())})


def _with_launched_gpu_work(steps: pa.Table, out: dict[str, pa.Table]) -> pa.Table:
    """GPU work launched inside a step that runs after the step's host end counts toward the
    step that launched it: each step's end moves to the end of that work, up to the next
    step's start (the last step: to the end of its work)."""
    r = out["runtime_api"]
    if steps.num_rows == 0 or r.num_rows == 0:
        return steps
    g_corr = np.concatenate([pc.fill_null(out[n]["correlation_id"], -1).to_numpy() for n in ("kernels", "memcpy")]).astype(np.int64)
    g_end = np.concatenate([out[n]["end_ns"].to_numpy() for n in ("kernels", "memcpy")]).astype(np.int64)
    if g_corr.size == 0:
        return steps
    r_corr = pc.fill_null(r["correlation_id"], -1).to_numpy().astype(np.int64)
    r_start = r["start_ns"].to_numpy().astype(np.int64)
    order = np.argsort(r_corr, kind="stable")
    pos = np.minimum(np.searchsorted(r_corr[order], g_corr), order.size - 1)
    ok = (g_corr >= 0) & (r_corr[order][pos] == g_corr)
    launch_t, work_end = r_start[order][pos][ok], g_end[ok]
    st = steps.sort_by([("start_ns", "ascending")])
    s0 = st["start_ns"].to_numpy().astype(np.int64)
    e0 = st["end_ns"].to_numpy().astype(np.int64)
    k = np.searchsorted(s0, launch_t, side="right") - 1
    inside = (k >= 0) & (launch_t < e0[np.maximum(k, 0)])
    last = e0.copy()
    np.maximum.at(last, k[inside], work_end[inside])
    nxt = np.append(s0[1:], np.iinfo(np.int64).max)
    new_end = np.maximum(e0, np.minimum(last, nxt))
    return st.set_column(st.schema.get_field_index("end_ns"), "end_ns", pa.array(new_end, pa.int64()))


def _steps(spans: pa.Table, rx: re.Pattern, where=None) -> pa.Table:
    names = spans["name"]
    if spans.num_rows:
        enc = pc.dictionary_encode(names).combine_chunks()
        ids = []
        for n in enc.dictionary.to_pylist():  # distinct names only
            mm = rx.search(n)
            g = mm.group(1) if mm else None  # ASCII digits only ('²' is not a step id); beyond int64 refused
            if g and not g.isascii() and any(c.isnumeric() for c in g):
                # A custom pattern's \w or \d (Python's \d is Unicode) read digits of another script:
                # int() would read '٣' as 3 and mix it with ASCII step 3. Refused, not skipped.
                raise InputError(where, f"--step-pattern {rx.pattern!r} captured {bounds.show(g)} from span {bounds.show(n)}: "
                                        "a step id is ASCII digits 0-9 (use [0-9]+ in the pattern)")
            ids.append(bounds.decimal_id(g, "step id", where) if g and g.isascii() and g.isdigit() else -1)
        sid = np.asarray(ids, np.int64)[enc.indices.to_numpy(zero_copy_only=False)]
    else:
        sid = np.zeros(0, np.int64)
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


def _base(meta: dict, parts: dict[str, list[pa.Table]], path: Path) -> tuple[int, float, bool]:
    """(base_ns, shift_us, unix_known): absolute ns = base_ns + (ts - shift_us) * 1000."""
    b = meta.get("baseTimeNanoseconds")
    if b is not None:
        return bounds.ns(b, "baseTimeNanoseconds", path), 0.0, True
    mins = [pc.min(t["ts_us"]).as_py() for ts in parts.values() for t in ts]
    ts_min = min((m for m in mins if m is not None), default=0.0)
    shift = float(np.floor(ts_min))
    # Older Kineto wrote Unix microseconds directly (> year 2001 in us); anything else is relative.
    return int(shift) * 1000, shift, shift > 1e15


def import_kineto(files, *, incident_id: str, incidents_dir: str | os.PathLike = "incidents",
                  step_pattern: str | None = None) -> Path:
    """Import Kineto trace files (one per rank) into `<incidents_dir>/<incident_id>/`; returns that path."""
    files = [Path(f) for f in files]
    if not files:
        raise InputError("kineto", "no trace files given")
    bounds.unique_files(files)  # the same trace twice would become two ranks
    out_dir = incident_dir(incidents_dir, incident_id)
    if (out_dir / MANIFEST).exists():
        raise StallcaseError(out_dir, "incident already exists: choose another --incident or remove it")
    step_rx = compile_pattern(step_pattern or DEFAULT_STEP_PATTERN, "--step-pattern")
    if step_rx.groups != 1:
        raise InputError("--step-pattern", "the regex needs exactly one group capturing the step id")
    ranks, unix_known, artifacts, bases = [], True, [], set()
    # Rank by rank: each rank's tables go to disk as it finishes, so memory holds one rank's
    # columns whatever the number of ranks (incident_stream.IncidentWriter).
    with IncidentWriter(out_dir, _TABLES) as w:
        for i, path in enumerate(files):
            pieces, meta = _read_one(path)
            rank = _rank_of(meta, i, path)
            if rank in ranks:
                raise InputError(path, f"rank {rank} appears in more than one trace file")
            ranks.append(rank)
            base, shift, known = _base(meta, pieces, path)
            unix_known &= known
            done = _finish(pieces, rank, base, shift, step_rx, path)
            del pieces
            bases.add(done.pop("_basis"))
            for name in _TABLES:  # checked here, an error names this trace and its field
                w.add(name, origin.checked(name, done.pop(name), path, origin.KINETO_FIELDS))
            del done
            pa.default_memory_pool().release_unused()  # hand this rank's parse buffers back before the next
            artifacts.append({"role": "input", "path": str(path.resolve()), "relpath": None,
                              "digest": _hash_streaming(path), "size": path.stat().st_size})
        if w.rows["steps"] == 0:
            raise InputError(files[0], f"no step spans match {step_rx.pattern!r}: profile with schedule/step() or pass --step-pattern")
        w.finish(_manifest(incident_id, w.rows, w.window(), ranks, unix_known, artifacts, step_rx.pattern, sorted(bases)))
    return out_dir


# The tables a Kineto import writes, in the order write_incident wrote them.
_TABLES = ("kernels", "memcpy", "runtime_api", "spans", "steps")


_BASIS = {"pattern": "step spans matched by the step pattern",
          "annotation": f"no ProfilerStep#N: steps from loop annotations ({FALLBACK_STEP_PATTERN})",
          "window": "no step annotations: one step over each rank's trace window"}


def _manifest(incident_id: str, rows: dict[str, int], window: dict | None, ranks: list[int], unix_known: bool,
              artifacts: list, pattern: str, bases: list[str] = ("pattern",)) -> dict:
    gpu = rows["kernels"] + rows["memcpy"]
    not_in_kineto = "Kineto traces carry no {}"
    return {
        "incident_id": incident_id,
        "reason": "import",
        "producer": "kineto-import",
        "clock": {"host": "realtime", "unix_minus_host_ns": 0 if unix_known else None},
        "window": window,
        "ranks": sorted(ranks),
        "sources": {
            "kernels": source("observed") if gpu else source("not_observed", "trace has no CUDA/HIP GPU activity (profiled without ProfilerActivity.CUDA, or another device kind such as MTIA, whose events are not read)"),
            "memcpy": source("observed") if gpu else source("not_observed", "trace has no GPU activity"),
            "runtime_api": source("observed") if rows["runtime_api"] else source("not_observed", "trace has no cuda_runtime/cuda_driver events"),
            "spans": source("observed") if rows["spans"] else source("not_observed", "trace has no cpu_op/user_annotation events"),
            "steps": source("observed", None, pattern=pattern, basis="; ".join(_BASIS[b] for b in bases)),
            "sched": source("not_observed", not_in_kineto.format("scheduler samples")),
            "nvml": source("not_observed", not_in_kineto.format("NVML samples")),
            "clock_sync": source("not_observed", "Kineto maps GPU times onto the host clock itself (CUPTI); no calibration rows"),
            "collectives": source("not_observed", "Kineto has no per-collective sequence ids; NCCL kernels are in the kernels table"),
        },
        "artifacts": artifacts,
        "trigger": None,
        "workload": None,
    }
