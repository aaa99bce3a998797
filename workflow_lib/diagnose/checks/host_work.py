"""host_work: host-only evidence where no GPU activity was observed (a CPU-only machine, or a
capture without a GPU source): the step's thread was working in its own host spans.

Evidence required: host spans and a GPU source that is not observed (with kernels observed,
host time is read through the GPU's idle gaps by host_submission instead). Labelled
"basis: host-only". Explains: the step thread's time in its spans that are not declared waits
(waits are input_starvation's), excluding spans that enclose the whole step (the step itself).
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, answer, top_names_summed, uniform
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, top_names, unresolved

NAME = "host_work"
BASIS = "host-only: no GPU activity observed; from the step thread's own host spans"


def host_span_rows(ci: CheckInput) -> np.ndarray:
    """Rows of the step thread's spans inside the step, not enclosing all of it."""
    ev, step = ci.rank.ev, ci.step
    sel = ev.span_index.overlapping(step.start_ns, step.end_ns)
    sel = sel[ev.span_thread[sel] == step.thread_id]
    whole = (ev.span_start[sel] <= step.start_ns) & (ev.span_end[sel] >= step.end_ns)
    return sel[~whole]


def describe(ci: CheckInput) -> Finding:
    if ci.rank.src.kernels:
        return not_applicable(NAME, note="GPU activity observed: host time is read through the GPU's idle gaps (host_submission)")
    if not ci.rank.src.spans:
        return unresolved(NAME, ["host spans (spans table not observed)"])
    ev, step = ci.rank.ev, ci.step
    sel = host_span_rows(ci)
    work = measures.union(ev.span_start[sel], ev.span_end[sel])
    work = measures.clip(work, step.start_ns, step.end_ns)
    wait = measures.clip(ev.wait_union, step.start_ns, step.end_ns)
    claimed = measures.subtract(work, wait) if len(wait) else work
    if claimed.total_ns == 0:
        return not_applicable(NAME, basis=BASIS, host_span_ns=0)
    names = ev.span_name[sel]
    return attributed(NAME, claimed, basis=BASIS, host_span_ns=claimed.total_ns,
                      spans=top_names(names, ev.span_end[sel] - ev.span_start[sel]))


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    n, ev, fr = si.frame.n, si.rank.ev, si.frame
    if si.rank.src.kernels:
        return uniform(NAME, n, NOT_APPLICABLE)
    if not si.rank.src.spans:
        return uniform(NAME, n, UNRESOLVED, ("host spans (spans table not observed)",))
    i, k = fr.overlapping(ev.span_start, ev.span_end)
    s, e = ev.span_start[i], ev.span_end[i]
    mine = (ev.span_thread[i] == fr.tids[k]) & ~((s <= fr.starts[k]) & (e >= fr.ends[k]))
    i, k = i[mine], k[mine]
    work = measures.union(np.maximum(ev.span_start[i], fr.starts[k]), np.minimum(ev.span_end[i], fr.ends[k]))
    claimed = measures.subtract(work, ev.wait_union) if len(ev.wait_union) else work
    att = fr.per_step(claimed) > 0
    out = answer(NAME, fr, att, claimed)
    on = att[k]
    out.spans_ns = top_names_summed(k[on], ev.span_name, i[on], ev.span_end[i[on]] - ev.span_start[i[on]])
    return out
