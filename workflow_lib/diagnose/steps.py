"""Which steps to diagnose: the steps table, or spans whose names match --step-pattern."""

from __future__ import annotations


import numpy as np
import pyarrow as pa

from ..core import bounds
from ..core.errors import InputError
from ..core.patterns import compile_pattern
from ..core.incident import Incident
from ..core.config.numbers import BYTES_PER_DIAGNOSED_STEP, MAX_DIAGNOSED_STEPS, MEMORY_BUDGET_BYTES
from .evidence import rank_key


def step_table(inc: Incident, step_pattern: str | None) -> pa.Table:
    """Columns step_id, thread_id, start_ns, end_ns, rank_key (int64, -1 = no rank)."""
    if step_pattern is not None:
        t = _from_spans(inc, step_pattern)
    else:
        t = inc.table("steps")
    if t.num_rows == 0:
        raise InputError(inc.path, "no steps to diagnose: the steps table is empty"
                         + ("" if step_pattern else "; name the step spans with --step-pattern REGEX"))
    if t.num_rows > MAX_DIAGNOSED_STEPS:  # refused before any per-step record is built
        raise InputError(inc.path, f"{t.num_rows} steps to diagnose, over the cap of {MAX_DIAGNOSED_STEPS} "
                                   f"({BYTES_PER_DIAGNOSED_STEP >> 10} KiB a step within the {MEMORY_BUDGET_BYTES >> 30} GiB memory "
                                   "budget): record a shorter window of the run")
    return pa.table({
        "step_id": t["step_id"].cast(pa.int64()), "thread_id": t["thread_id"].cast(pa.int64()),
        "start_ns": t["start_ns"].cast(pa.int64()), "end_ns": t["end_ns"].cast(pa.int64()),
        "rank_key": pa.array(rank_key(t["rank"])),
    }).sort_by([("rank_key", "ascending"), ("start_ns", "ascending")])


def _from_spans(inc: Incident, pattern: str) -> pa.Table:
    rx = compile_pattern(pattern, "--step-pattern")  # linear time: span names come from the trace
    if rx.groups != 1:
        raise InputError("--step-pattern", "the regex needs exactly one group capturing the step id")
    spans = inc.table("spans")
    names = spans["name"].to_numpy(zero_copy_only=False) if spans.num_rows else np.zeros(0, object)
    uniq, inv = np.unique(names, return_inverse=True) if names.size else (names, np.zeros(0, np.int64))
    ids = []
    for n in uniq:  # distinct names, not events
        m = rx.search(str(n))
        g = m.group(1) if m else None  # ASCII digits only; beyond int64 refused
        ids.append(bounds.decimal_id(g, "step id", "--step-pattern") if g and g.isascii() and g.isdigit() else -1)
    step_of = np.asarray(ids, np.int64)[inv] if uniq.size else np.zeros(0, np.int64)
    keep = step_of >= 0
    t = spans.filter(pa.array(keep)).append_column("step_id", pa.array(step_of[keep]))
    # A step name can repeat on nested spans (e.g. a profiler wrapper): keep the outermost.
    t = t.sort_by([("rank", "ascending"), ("step_id", "ascending"), ("depth", "ascending"), ("start_ns", "ascending")])
    rk = rank_key(t["rank"]) if t.num_rows else np.zeros(0, np.int64)
    sid = t["step_id"].to_numpy() if t.num_rows else np.zeros(0, np.int64)
    first = np.ones(sid.size, bool)
    first[1:] = (sid[1:] != sid[:-1]) | (rk[1:] != rk[:-1])
    return t.filter(pa.array(first))
