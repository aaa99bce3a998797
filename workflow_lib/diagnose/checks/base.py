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


def needs_calls_and_kernels(ci: "CheckInput", check: str) -> Finding | None:
    """`unresolved` naming what is absent when host CUDA calls or GPU activity were not
    observed (checks that time GPU idle after a host call need both); None when both were."""
    missing = []
    if not ci.src.runtime_api:
        missing.append("host CUDA API calls (runtime_api not observed)")
    if not ci.src.kernels:
        missing.append("GPU activity (kernels not observed)")
    return unresolved(check, missing) if missing else None


def calls_in_step(ci: "CheckInput", kind: np.ndarray) -> np.ndarray:
    """Rows of the host CUDA calls overlapping the step for which `kind` (a per-call mask of
    the rank's runtime_api rows, e.g. ev.rt_sync or ev.rt_alloc) is true."""
    rows = ci.ev.rt_index.overlapping(ci.step.start_ns, ci.step.end_ns)
    return rows[kind[rows]]


def next_gpu_start(ev: RankEvidence, after_ns: np.ndarray, step_end_ns: int) -> np.ndarray:
    """For each time in `after_ns`: the first GPU activity starting at or after it, bounded by
    the step end (and never before the time itself)."""
    g = ev.gpu_start_sorted
    j = np.searchsorted(g, after_ns, side="left")
    nxt = np.where(j < g.size, g[np.minimum(j, g.size - 1)], step_end_ns)
    return np.minimum(np.maximum(nxt, after_ns), step_end_ns)


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
