"""input_starvation: the host sat in a declared wait span (dataloader, queue, ...) while the GPU was idle.

Evidence required: host spans and GPU activity. Attributed from time spent waiting, never
from a queue-depth sample: a sampled depth says nothing about the moments between samples,
while a wait span is the host's own record of having nothing to submit.
Explains: GPU idle inside wait spans. Without any GPU source (a CPU-only machine) the wait
time itself, labelled "basis: host-only": there is no GPU to idle, the step waited.
"""

from __future__ import annotations

from .. import measures
from ..batch import UNRESOLVED, StepsInput, StepFindings, answer, uniform
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, top_names, unresolved

NAME = "input_starvation"


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.spans:
        return unresolved(NAME, ["host spans (spans table not observed)"])
    ev, step = ci.rank.ev, ci.step
    wait = measures.clip(ev.wait_union, step.start_ns, step.end_ns)
    if wait.total_ns == 0:
        return not_applicable(NAME, wait_ns=0, patterns=list(ci.rank.opts.wait_patterns))
    host_only = not ci.rank.src.kernels
    claimed = wait if host_only else measures.intersect(ci.base.idle, wait)
    regex = ci.rank.opts.wait_regex()
    sel = ev.span_index.overlapping(step.start_ns, step.end_ns)
    names = ev.span_name[sel]
    is_wait = [bool(regex.search(str(n))) for n in names]  # spans of one step: a handful
    evidence = {
        **({"basis": "host-only: no GPU activity observed; the step's own wait spans"} if host_only else {}),
        "wait_ns": wait.total_ns,
        "gpu_idle_during_wait_ns": claimed.total_ns,
        "wait_spans": top_names(names[is_wait], (ev.span_end[sel] - ev.span_start[sel])[is_wait]),
    }
    if claimed.total_ns < ci.rank.opts.min_gap_ns:
        evidence["note"] = "the host waited but the GPU stayed busy: the wait was hidden"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    if not si.rank.src.spans:
        return uniform(NAME, si.frame.n, UNRESOLVED, ("host spans (spans table not observed)",))
    fr, ev = si.frame, si.rank.ev
    wait = fr.pieces(ev.wait_union)
    claimed = wait if not si.rank.src.kernels else measures.intersect(si.base.idle, wait)
    got = fr.per_step(claimed)
    return answer(NAME, fr, (fr.per_step(wait) > 0) & (got >= si.rank.opts.min_gap_ns), claimed)
