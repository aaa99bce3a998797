"""What every trace importer derives the same way once its rows are on the ns timeline.

Kineto traces and Nsight Systems exports name their events differently but end in the same
tables: host API calls (is_sync from the one vocabulary), host spans (nesting depth per thread),
steps (from span names by the step pattern, else loop annotations, else one step over the
window) and each step's end moved past the GPU work it launched. One definition here, used by
importers/kineto.py and importers/nsys.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import blake3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import bounds, vocabulary
from ..core.errors import InputError

DEFAULT_STEP_PATTERN = r"ProfilerStep#(\d+)"
# Without ProfilerStep#N (profiled without schedule/step()): annotations people write
# around their loop body (record_function("train_step_12"), "iteration 3", "step#4").
FALLBACK_STEP_PATTERN = r"(?i)(?<![A-Za-z0-9])(?:train_step|training_step|step|iteration|iter)[ _#:-]?(\d+)(?![A-Za-z0-9])"

BASIS = {"pattern": "step spans matched by the step pattern",
         "annotation": f"no ProfilerStep#N: steps from loop annotations ({FALLBACK_STEP_PATTERN})",
         "window": "no step annotations: one step over each rank's trace window"}


def derive(out: dict[str, pa.Table], rank: int, step_rx, where=None) -> str:
    """Add runtime_api.is_sync, spans.depth and the steps table to one rank's tables (in place,
    each sorted by start_ns); returns how the steps were found (a BASIS key)."""
    r = out["runtime_api"]
    out["runtime_api"] = r.append_column("is_sync", pa.array(vocabulary.per_name(r["name"], vocabulary.is_sync_call), pa.bool_()))
    sp = out["spans"]
    tid = sp["thread_id"].to_numpy()
    depth = depths(tid, sp["start_ns"].to_numpy(), sp["end_ns"].to_numpy()) if sp.num_rows else np.zeros(0, np.int64)
    out["spans"] = sp.append_column("depth", pa.array(depth.astype(np.int32)))
    steps, basis = steps_from_spans(out["spans"], step_rx, where), "pattern"
    default = step_rx.pattern == DEFAULT_STEP_PATTERN
    if steps.num_rows == 0 and default:
        refuse_malformed_profiler_steps(out["spans"], where)
        steps, basis = steps_from_spans(out["spans"], re.compile(FALLBACK_STEP_PATTERN), where), "annotation"
    if steps.num_rows == 0 and default:
        steps, basis = window_step(out, rank), "window"
    out["steps"] = with_launched_gpu_work(steps, out)
    return basis


def is_async(m: pa.Table, r: pa.Table) -> pa.Array:
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


def hash_streaming(path: Path) -> str:
    """blake3 of the input read in 1 MiB blocks (cas.hash_file mmaps large files, which
    would count the whole trace in the importer's resident memory)."""
    h = blake3.blake3()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def depths(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
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


def refuse_malformed_profiler_steps(spans: pa.Table, where) -> None:
    """A `ProfilerStep#` span whose id is not an ASCII decimal (e.g. `ProfilerStep#²`) is a
    damaged step annotation, not a trace without steps: refuse it rather than fall back."""
    if not spans.num_rows:
        return
    bad = pc.filter(spans["name"], pc.starts_with(spans["name"], "ProfilerStep#"))
    if len(bad):
        raise InputError(where, f"no step spans match {DEFAULT_STEP_PATTERN!r}: {str(bad[0].as_py())[:80]!r} names a step "
                                "whose id is not an ASCII decimal number")


def window_step(out: dict[str, pa.Table], rank: int) -> pa.Table:
    """No step annotations at all: one step over the trace window (every event), owned by the
    thread with the most runtime calls (else the most host spans)."""
    starts = [int(pc.min(t["start_ns"]).as_py()) for t in out.values() if t.num_rows]
    ends = [int(pc.max(t["end_ns"]).as_py()) for t in out.values() if t.num_rows]
    if not starts:
        return steps_from_spans(out["spans"], re.compile(DEFAULT_STEP_PATTERN))
    src = out["runtime_api"] if out["runtime_api"].num_rows else out["spans"]
    if src.num_rows:
        tids, counts = np.unique(src["thread_id"].to_numpy(), return_counts=True)
        tid = int(tids[np.argmax(counts)])
    else:
        tid = 0
    return pa.table({"step_id": pa.array([0], pa.int64()), "thread_id": pa.array([tid], pa.int64()),
                     "start_ns": pa.array([min(starts)], pa.int64()), "end_ns": pa.array([max(ends)], pa.int64()),
                     "rank": pa.array([rank], pa.int32())})


def with_launched_gpu_work(steps: pa.Table, out: dict[str, pa.Table]) -> pa.Table:
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


def steps_from_spans(spans: pa.Table, rx: re.Pattern, where=None) -> pa.Table:
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


def step_regex(step_pattern: str | None):
    """The user's --step-pattern (default ProfilerStep#N), compiled linear-time (core/patterns.py),
    with exactly one group capturing the step id."""
    from ..core.patterns import compile_pattern

    rx = compile_pattern(step_pattern or DEFAULT_STEP_PATTERN, "--step-pattern")
    if rx.groups != 1:
        raise InputError("--step-pattern", "the regex needs exactly one group capturing the step id")
    return rx
