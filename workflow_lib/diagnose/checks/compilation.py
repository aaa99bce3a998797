"""compilation: compiling or autotuning after warm-up (a torch.compile recompile on a new
shape, a late Triton autotune) stalled a steady-state step.

Evidence required: host spans whose names say compilation or autotuning (vocabulary.COMPILE_RE): in
Kineto traces, torch's `dynamo_timed` regions ("_compile.compile_inner (dynamo_timed)",
"compile_fx.<locals>.fw_compiler_base (dynamo_timed)", "CachingAutotuner.benchmark_all_configs
(dynamo_timed)") and triton autotune/benchmark spans; in recorder captures, spans the user or
a hook names (e.g. around torch._dynamo's compile callbacks). Not "Torch-Compiled Region" or
"CompiledFunction": those are the compiled code running, every step.
Explains: the step's time inside those spans, busy or idle (an autotuner's benchmark kernels
are part of the cost), resolved right after warm_up. Warm-up steps are warm_up's. The
evidence also names compiled regions ("Torch-Compiled Region: 0/1", the second compile of
frame 0) first seen in the step: the trace's own mark that a recompile happened there.
"""

from __future__ import annotations

import re

import numpy as np

from .. import measures
from ..batch import NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, answer, top_names_summed
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, top_names, unresolved

NAME = "compilation"


def describe(ci: CheckInput) -> Finding:
    if ci.warm_up is not None:
        return not_applicable(NAME, note="a warm-up step: compilation there is warm_up's, once per process")
    if not ci.rank.src.spans:
        return unresolved(NAME, ["host spans (spans table not observed)"])
    ev, step = ci.rank.ev, ci.step
    sel = ev.span_index.overlapping(step.start_ns, step.end_ns)
    names = ev.span_name[sel]
    hit = ev.span_is_compile[sel]
    if not hit.any():
        fresh = _first_seen_regions(ci, sel)
        return not_applicable(NAME, compile_spans=0, **({"compiled_regions_first_seen": fresh} if fresh else {}))
    rows = sel[hit]
    fresh = _first_seen_regions(ci, sel)
    claimed = measures.clip(measures.union(ev.span_start[rows], ev.span_end[rows]), step.start_ns, step.end_ns)
    evidence = {"compile_ns": claimed.total_ns, "gpu_idle_in_compile_ns": measures.intersect(ci.base.idle, claimed).total_ns,
                "spans": top_names(names[hit], ev.span_end[rows] - ev.span_start[rows])}
    if fresh:
        evidence["compiled_regions_first_seen"] = fresh
    if claimed.total_ns < ci.rank.opts.min_gap_ns:
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)


_REGION = re.compile(r"^Torch-Compiled Region: \d+/\d+")


def _first_seen_regions(ci: CheckInput, sel: np.ndarray) -> list[str]:
    """Compiled-region names whose first span in the rank starts inside this step."""
    ev, step = ci.rank.ev, ci.step
    codes = ev.span_name.codes[sel]
    first = ev.span_first_start[codes] if codes.size else codes
    out = set()
    for k in np.flatnonzero(first >= step.start_ns):  # spans of one step
        name = str(ev.span_name[sel[k]])
        if _REGION.match(name):
            out.add(name)
    return sorted(out)[:10]


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, ev = si.frame, si.rank.ev
    cold = si.is_cold
    if not si.rank.src.spans:
        out = answer(NAME, fr, np.zeros(fr.n, bool), measures.empty(), otherwise=UNRESOLVED)
        out.verdict[cold] = NOT_APPLICABLE
        out.missing = [(), ("host spans (spans table not observed)",)]
        out.missing_code = (~cold).astype(np.int32)
        return out
    rows = np.flatnonzero(ev.span_is_compile)
    w, k = fr.overlapping(ev.span_start[rows], ev.span_end[rows])
    hit = np.bincount(k, minlength=fr.n)[: fr.n] > 0
    claimed = fr.pieces(measures.union(ev.span_start[rows], ev.span_end[rows]))
    att = ~cold & hit & (fr.per_step(claimed) >= si.rank.opts.min_gap_ns)
    out = answer(NAME, fr, att, claimed)
    on = att[k]
    r = rows[w[on]]
    out.spans_ns = top_names_summed(k[on], ev.span_name, r, ev.span_end[r] - ev.span_start[r])
    return out
