"""What gc_pause and checkpoint_stall share: a host span that stops the step's submitting
thread, credited by its consequence.

With GPU activity recorded for the step: the spans' time with no kernel running other than
those launched inside the spans (the queue drained behind the stopped host; a pause the
queued work covered cost nothing; a save's own copies and kernels, its state dict's
device->host copies, are the save's: copies are never GPU work). Without it (a
CPU-only program, a step outside every CUPTI window): the spans' own time, labelled
"basis: host-only", since the step's wall holds the whole pause.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import StepFindings, StepsInput, UNRESOLVED, answer, uniform
from ..evidence import launch_rows_at
from ..fast import searchsorted
from ..types import Intervals
from . import base_steps
from .base import CheckInput, attributed, not_applicable

NO_SPANS = "host spans (spans table not observed)"
HOST_ONLY = "host-only: no GPU activity observed for the step; the pause's own time"


def verdict(name: str, ci: CheckInput, claimed: Intervals, evidence: dict, hidden: str):
    """The pause claims the GPU idle it left; under the gap threshold the GPU stayed busy through it
    (queued work hid it): not this step's stall, with `hidden` saying so."""
    if claimed.total_ns < ci.rank.opts.min_gap_ns:
        return not_applicable(name, **evidence, note=hidden)
    return attributed(name, claimed, **evidence)


def rows_in_step(ci: CheckInput, mask: np.ndarray, own_thread: bool) -> np.ndarray:
    """Rows of the spans where `mask` holds overlapping the step (of its thread when `own_thread`)."""
    ev, step = ci.rank.ev, ci.step
    sel = ev.span_index.overlapping(step.start_ns, step.end_ns)
    sel = sel[mask[sel]]
    return sel[ev.span_thread[sel] == step.thread_id] if own_thread else sel


def _own_busy(ev, spans: Intervals, lo: int, hi: int) -> Intervals:
    """Busy time of the kernels starting in [lo, hi) whose launch call began inside `spans`."""
    i, j = searchsorted(ev.k_start, [lo, hi], side="left")
    rows, ok = launch_rows_at(ev, ev.k_corr[i:j], ev.k_start[i:j])
    if not ok.any():
        return measures.empty()
    mine = ok & base_steps.covers(spans.start_ns, spans.end_ns, ev.rt_start[rows])
    return measures.union(ev.k_start[i:j][mine], ev.k_end[i:j][mine])


def _claim(ev, spans: Intervals, kernels: bool, lo: int, hi: int) -> Intervals:
    if not kernels:
        return spans
    return measures.union_many(measures.subtract(spans, ev.kernel_busy), measures.intersect(spans, _own_busy(ev, spans, lo, hi)))


def claim_one(ci: CheckInput, rows: np.ndarray, extra: tuple | None = None) -> tuple[Intervals, Intervals]:
    """(the spans' time in the step, what is claimed of it) for one step; `extra`: (start, end)
    of more pause intervals than the span rows (inferred ones: save_shape.py)."""
    ev, step = ci.rank.ev, ci.step
    s, e = ev.span_start[rows], ev.span_end[rows]
    if extra is not None:
        s, e = np.concatenate([s, extra[0]]), np.concatenate([e, extra[1]])
    spans = measures.clip(measures.union(s, e), step.start_ns, step.end_ns)
    return spans, _claim(ev, spans, ci.rank.src.kernels, step.start_ns, step.end_ns)


def check_all(si: StepsInput, name: str, mask: np.ndarray, own_thread: bool, extra: tuple | None = None) -> StepFindings:
    """The rule for every step of a rank at once (diagnose/batch.py); `extra`: (start, end,
    thread) of pause intervals besides the span rows, as claim_one's."""
    fr, ev = si.frame, si.rank.ev
    if not si.rank.src.spans:
        return uniform(name, fr.n, UNRESOLVED, (NO_SPANS,))
    rows = np.flatnonzero(mask)
    s0, e0, t0 = ev.span_start[rows], ev.span_end[rows], ev.span_thread[rows]
    if extra is not None:
        s0, e0, t0 = np.concatenate([s0, extra[0]]), np.concatenate([e0, extra[1]]), np.concatenate([t0, extra[2]])
    i, k = fr.overlapping(s0, e0)
    if own_thread:
        keep = t0[i] == fr.tids[k]
        i, k = i[keep], k[keep]
    spans = measures.union(np.maximum(s0[i], fr.starts[k]), np.minimum(e0[i], fr.ends[k]))
    claimed = _claim(ev, spans, si.rank.src.kernels, int(fr.starts.min(initial=0)), int(fr.ends.max(initial=0)))
    return answer(name, fr, (fr.per_step(spans) > 0) & (fr.per_step(claimed) >= si.rank.opts.min_gap_ns), claimed)
