"""What every check receives: the step, its measured base (busy, idle) and the rank's evidence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import measures
from ..evidence import RankEvidence, Sources
from ..types import DiagnoseOptions, Finding, Intervals, StepWindow


@dataclass(frozen=True)
class StepBase:
    """The step's GPU timeline, computed once and shared by the checks (relative ns)."""

    step: StepWindow
    busy: Intervals
    idle: Intervals
    idle_long: Intervals  # idle gaps of at least options.min_gap_ns


@dataclass(frozen=True)
class CheckInput:
    step: StepWindow
    base: StepBase
    ev: RankEvidence
    src: Sources
    opts: DiagnoseOptions


def make_base(step: StepWindow, ev: RankEvidence, min_gap_ns: int) -> StepBase:
    busy = measures.clip(ev.busy, step.start_ns, step.end_ns)
    idle = measures.gaps(ev.busy, step.start_ns, step.end_ns)
    lengths = idle.end_ns - idle.start_ns
    keep = lengths >= min_gap_ns
    return StepBase(step, busy, idle, Intervals(idle.start_ns[keep], idle.end_ns[keep]))


def host_gaps(ci: "CheckInput") -> Intervals:
    """GPU idle gaps (>= min_gap_ns) where the host was neither in a synchronizing call, an
    allocator call nor a declared wait: the candidates for host-side causes."""
    ev, lo, hi = ci.ev, ci.step.start_ns, ci.step.end_ns
    cand = ci.base.idle_long
    for u in (ev.sync_union, ev.alloc_union, ev.wait_union):
        if len(u):
            cand = measures.subtract(cand, measures.clip(u, lo, hi))
    keep = (cand.end_ns - cand.start_ns) >= ci.opts.min_gap_ns
    return Intervals(cand.start_ns[keep], cand.end_ns[keep])


def unresolved(check: str, missing: list[str], **evidence) -> Finding:
    return Finding(check, "unresolved", measures.empty(), evidence, tuple(missing))


def not_applicable(check: str, **evidence) -> Finding:
    return Finding(check, "not_applicable", measures.empty(), evidence, ())


def attributed(check: str, claimed: Intervals, **evidence) -> Finding:
    return Finding(check, "attributed", claimed, evidence, ())


def top_names(names: np.ndarray, weights: np.ndarray, limit: int = 5) -> dict[str, int]:
    """Largest total weight per distinct name (for evidence), largest first."""
    if names.size == 0:
        return {}
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    tot = np.bincount(inv, weights=weights.astype(float))
    order = np.argsort(-tot, kind="stable")[:limit]
    return {str(uniq[i]): int(tot[i]) for i in order}
