"""gc_pause: Python's cyclic garbage collector stopped the host during the step.

Evidence required: host spans named vocabulary.GC_SPAN ("gc.collect", made by the zero-change
capture through gc.callbacks: capture/inprocess/gc_hooks.py), with the generation and the
objects collected of each generation-1 and -2 collection (span_details). Kineto and Nsight
traces hold no such span: there the pause stays host time, host_submission's.
Explains (checks/host_stall.py): the GPU idle inside the collections, or without GPU activity
for the step their own time ("basis: host-only"). Spans of any thread of the rank: a
collection holds the GIL, so every Python thread of the process stops with it.
The fix depends on what collected: a full (generation 2) collection over many live objects is
made short by gc.freeze() after setup (the model, the dataset index: objects that live for the
run leave the collector's view); collections anywhere in the step are made predictable by
turning automatic collection off and collecting every N steps, on the same step on every rank
(a collection on one rank is a straggler for all in the next collective).
"""

from __future__ import annotations

from ...core.vocabulary import GC_SPAN
from ..batch import StepFindings, StepsInput
from ..types import Finding
from . import host_stall
from .base import CheckInput, not_applicable, unresolved

NAME = "gc_pause"
FREEZE = "call gc.freeze() once after setup (model, optimizer, dataset built) so long-lived objects leave the collector's view"
SCHEDULE = ("turn automatic collection off (gc.disable()) and run gc.collect() every N steps yourself"
            "{ranks}")
SAME_STEP = ", on the same step on every rank (a collection on one rank stalls all of them in the next collective)"


def fix_text(generations: set[int], ranks: int) -> str:
    """The change for the collections seen: gc.freeze() where a full collection ran."""
    parts = [FREEZE] if 2 in generations else []
    parts.append(SCHEDULE.format(ranks=SAME_STEP if ranks > 1 else ""))
    return "; ".join(parts)


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.spans:
        return unresolved(NAME, [host_stall.NO_SPANS])
    ev = ci.rank.ev
    rows = host_stall.rows_in_step(ci, ev.span_is_gc, own_thread=False)
    if rows.size == 0:
        return not_applicable(NAME, collections=0)
    spans, claimed = host_stall.claim_one(ci, rows)
    by_gen: dict[str, dict] = {}
    largest = None
    for r in rows.tolist():  # collections of one step: a handful
        d = ev.details.of(GC_SPAN, int(ev.span_thread[r]), int(ev.span_start[r]))
        gen = int(ev.details.generation[d]) if d is not None else -1
        objects = int(ev.details.objects[d]) if d is not None else -1
        dur = int(ev.span_end[r] - ev.span_start[r])
        key = str(gen) if gen >= 0 else "not recorded"
        g = by_gen.setdefault(key, {"collections": 0, "ns": 0, "objects": 0})
        g["collections"] += 1
        g["ns"] += dur
        g["objects"] += max(objects, 0)
        if largest is None or dur > largest["ns"]:
            largest = {"ns": dur, "generation": gen if gen >= 0 else None, "objects": objects if objects >= 0 else None}
    gens = {int(k) for k in by_gen if k != "not recorded"}
    evidence = {
        **({"basis": host_stall.HOST_ONLY} if not ci.rank.src.kernels else {}),
        "collections": int(rows.size), "pause_ns": spans.total_ns, "gpu_idle_during_pause_ns": claimed.total_ns,
        "by_generation": by_gen, "largest": largest, "fix": fix_text(gens, ci.rank.src.ranks),
    }
    return host_stall.verdict(NAME, ci, claimed, evidence, hidden="the collector ran but the GPU stayed busy: the pause was hidden")


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    return host_stall.check_all(si, NAME, si.rank.ev.span_is_gc, own_thread=False)
