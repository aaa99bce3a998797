"""first_call: a one-time cost inside a step after warm-up: the first call of a named host
operation took far longer than its later calls (lazy init mid-run: the first call of an op or
kernel loading its module, a handle created on first use, the first `.item()` allocating its
pinned staging, the first eval step or checkpoint).

Evidence required: named host operations (host spans, CUDA runtime calls; diagnose/first_calls.py
says which and the thresholds: `first_call_factor`, `first_call_min_later`, `first_call_min_ns`),
a name's first call in the recording overlapping the step. A recording that starts mid-run
cannot say the call was the process's first: the evidence says "first in this recording".
Explains: each first call's duration less the name's typical call, on the GPU's idle time inside
the call (a cost the queued work covered cost nothing), or host-only its own time. Resolved after
the checks whose spans name what stopped the host (compilation, GC, a checkpoint) and a measured
run-queue wait, before the call-shaped causes: the idle a first call leaves is its own, not a
sync's refill nor an allocator call's. Warm-up steps are warm_up's (not_applicable there).
Like warm_up it is never ranked as a next experiment: it is paid once, its fix is to warm the op
up before the timed region, not a per-step change.
"""

from __future__ import annotations

import numpy as np

from .. import first_calls, measures
from ..batch import NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, answer, uniform
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "first_call"
NO_NAMES = "named host operations (spans and runtime_api not observed)"
HOST_ONLY = "host-only: no GPU activity observed for the step; the first calls' own time over their typical call"
FIRST_IN = "this recording (it may start mid-run: not necessarily the process's first call)"
FIX = ("a one-time cost: warm the op up (call it once) before the timed region or before the first measured step; "
       "not a per-step lever")
LISTED = 5  # first calls named in the evidence, largest one-time cost first


def _rows(fc, src) -> np.ndarray:
    """The first calls the step's sources hold: spans where spans were observed, runtime calls
    where runtime_api was."""
    ok = np.where(fc.runtime, bool(src.runtime_api), bool(src.spans))
    return np.flatnonzero(ok)


def describe(ci: CheckInput) -> Finding:
    if ci.warm_up is not None:
        return not_applicable(NAME, note="a warm-up step: first calls there are warm_up's, once per process")
    src = ci.rank.src
    if not (src.spans or src.runtime_api):
        return unresolved(NAME, [NO_NAMES])
    ev, step, opts = ci.rank.ev, ci.step, ci.rank.opts
    fc = first_calls.of_rank(ev, opts)
    rows = _rows(fc, src)
    rows = rows[(fc.start[rows] < step.end_ns) & (fc.end[rows] > step.start_ns)]
    if rows.size == 0:
        return not_applicable(NAME, first_calls=0)
    claimed = measures.clip(first_calls.claims(fc, ev, rows, src.kernels), step.start_ns, step.end_ns)
    by_name: dict[str, dict] = {}
    for i in sorted(rows.tolist(), key=lambda i: (-int(fc.one_time_ns[i]), str(fc.name[i])))[:LISTED]:
        own = measures.clip(first_calls.claims(fc, ev, np.array([i]), src.kernels), step.start_ns, step.end_ns)
        typ = int(fc.typical_ns[i])
        by_name[str(fc.name[i])] = {
            "source": "CUDA runtime call" if fc.runtime[i] else "host span", "thread_id": int(fc.thread[i]),
            "first_ns": int(fc.end[i] - fc.start[i]), "typical_ns": typ, "later_calls": int(fc.later[i]),
            "over_typical": round(float((fc.end[i] - fc.start[i]) / typ), 1) if typ > 0 else None,
            "one_time_ns": int(fc.one_time_ns[i]), "critical_ns": own.total_ns}
    evidence = {
        **({"basis": HOST_ONLY} if not src.kernels else {}),
        "once": True, "first_in": FIRST_IN, "first_calls": int(rows.size),
        "one_time_ns": int(fc.one_time_ns[rows].sum()), "claimed_ns": claimed.total_ns, "by_name": by_name, "fix": FIX,
    }
    if claimed.total_ns < opts.min_gap_ns:
        return not_applicable(NAME, **evidence, note="the first call ran but the GPU stayed busy through it: queued work hid it")
    return attributed(NAME, claimed, **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, src = si.frame, si.rank.src
    cold = si.is_cold
    if not (src.spans or src.runtime_api):
        out = uniform(NAME, fr.n, UNRESOLVED, (NO_NAMES,))
        out.verdict[cold] = NOT_APPLICABLE
        out.missing_code = (~cold).astype(np.int32)
        return out
    fc = first_calls.of_rank(si.rank.ev, si.rank.opts)
    claimed = fr.pieces(first_calls.claims(fc, si.rank.ev, _rows(fc, src), src.kernels))
    att = ~cold & (fr.per_step(claimed) >= si.rank.opts.min_gap_ns)
    return answer(NAME, fr, att, claimed)
