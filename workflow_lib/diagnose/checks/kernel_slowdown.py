"""kernel_slowdown: the same kernels ran slower than they usually do (issue 34): "the same work,
slower", told apart from "more work".

Evidence required: per-kernel GPU activity (kernels). A kernel's identity is its name and
launch shape (grid, block: evidence.k_ident); its typical duration is the median over the
rank's launches of that identity (at least MIN_LAUNCHES of them). NCCL/RCCL kernels are left
out: their length is mostly waiting for the slowest peer (collective_wait's). A kernel is slower when it
ran more than SLOW_FACTOR x its typical duration; its extra time (duration - typical) is the
slowdown. More kernels, or other kernels, are not slowdown: their time stays gpu_work's (the
excess cause gpu_work_growth). Without per-kernel evidence the check is unresolved and says so.
Attributed where the step's slowdown is at least max(min_gap_ns, MIN_FRACTION of the step).
Explains: the last `extra` ns of each slower kernel (the time it ran past its typical length),
in whichever step that time falls (a kernel slowed past its step's end spills its extra into the
next step, whose work waited behind it: evidence `slower_kernels_from_before`), resolved after clock_throttle (which takes the time NVML's clocks explain) and before
gpu_bound/gpu_work.
Why, from what the capture holds (evidence `why`): the SM clock during the step against the
rank's median and NVML's clock-event reasons (clocks: thermal or power); device memory in use
against the rank's median (another process's allocation on the GPU); else "not known".
NVML's per-process lists are not recorded, so another process time-slicing the GPU is named
only as a possibility the evidence cannot settle.

Held time (diagnose/held.py): another process time-slicing the GPU shows less as slower
kernels than as the step's launched, ready kernels and copies waiting while none of its work
runs. Where the record is shown complete (held.py says what that takes), that time in the step,
when at least max(min_gap_ns, MIN_FRACTION of the step), is this check's too, credited ahead of
the checks that read idle GPU time as the host's or a call's (checks.FIRST_AFTER: a `.item()`
that waited on a GPU another process held did not idle it). Evidence `held`: its time, the
waits, what completeness rests on, who held the GPU as far as the capture says, and the fix.
"""

from __future__ import annotations

import numpy as np

from .. import held as held_mod
from .. import measures
from ..batch import UNRESOLVED, StepFindings, StepsInput, answer, uniform
from ..evidence import per_rank
from ..fast import searchsorted
from ..types import Finding, Intervals
from .base import CheckInput, not_applicable, top_names, unresolved

NAME = "kernel_slowdown"
SLOW_FACTOR = 1.2  # slower than this x typical: a 20% longer kernel is not jitter on a GPU to itself
MIN_LAUNCHES = 5  # fewer launches of an identity give no typical duration
MIN_FRACTION = 0.05  # of the step: less slowdown than this is noise
NO_KERNELS = "per-kernel GPU activity (kernels not observed): the same kernels cannot be compared across steps"
CLOCK_DROP = 0.95  # the step's SM clock below this x the rank's median: clocks were lower
# Device memory in use this much above the rank's median: another allocation (a second CUDA
# context alone takes ~500 MiB).
MEM_RISE_BYTES = 256 << 20


def extra_per_kernel(ev) -> np.ndarray:
    """Per kernel of the rank: its run past SLOW_FACTOR x its identity's typical duration,
    the whole excess over typical (0 where not slower or without a typical)."""
    return per_rank(ev, "kernel_extra", lambda: _extra_per_kernel(ev))


def _extra_per_kernel(ev) -> np.ndarray:
    dur = ev.k_end - ev.k_start
    out = np.zeros(dur.size, np.int64)
    if dur.size:
        ident = ev.k_ident
        order = np.lexsort((dur, ident))
        g, d = ident[order], dur[order]
        lo = searchsorted(g, np.arange(int(ident.max()) + 1), side="left")
        hi = searchsorted(g, np.arange(int(ident.max()) + 1), side="right")
        cnt = hi - lo
        mid = (d[np.minimum(lo + (cnt - 1) // 2, d.size - 1)] + d[np.minimum(lo + cnt // 2, d.size - 1)]) // 2
        typical = mid[ident]
        # A collective kernel's length is mostly its wait for the slowest peer: collective_wait's.
        ok = (cnt[ident] >= MIN_LAUNCHES) & (dur > SLOW_FACTOR * typical) & ~ev.k_nccl
        out = np.where(ok, dur - typical, 0).astype(np.int64)
    return out


def _claims(ev, rows: np.ndarray, extra: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Intervals:
    e = ev.k_end[rows]
    return measures.union(np.maximum(e - extra, lo), np.minimum(e, hi))


_SLOW: dict = {}


def _slow_rows(extra: np.ndarray) -> np.ndarray:
    """np.flatnonzero(extra > 0), once per rank's extra_per_kernel array (describe runs per step)."""
    hit = _SLOW.get(id(extra))
    if hit is not None and hit[0] is extra:
        return hit[1]
    out = np.flatnonzero(extra > 0)
    _SLOW.clear()
    _SLOW[id(extra)] = (extra, out)  # holds the array itself, so its id cannot be reused while cached
    return out


def _slow_overlapping(ev, extra: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Rows of the slower kernels whose extra (their last `extra` ns) overlaps [lo, hi): those
    that started in the step and those of an earlier step still running past its start."""
    slow = _slow_rows(extra)  # kernels are in start order, so these are too
    slow = slow[: int(searchsorted(ev.k_start[slow], hi, side="left"))]
    return slow[(ev.k_end[slow] > lo) & (ev.k_end[slow] - extra[slow] < hi)]


def _median_in(ev, metric: str, lo: int, hi: int) -> tuple[float | None, float | None]:
    """(the metric's mean inside [lo, hi), its median over the rank) from NVML samples."""
    got = ev.nvml.get(metric)
    if got is None or got[0].size == 0:
        return None, None
    ts, v = got
    i, j = searchsorted(ts, [lo, hi])
    return (float(np.mean(v[i:j])) if j > i else None), float(np.median(v))


HELD_BY = ("the GPU ran work that is not in this program's record while the step's work waited: another process "
           "on the GPU, unless the program's own stream waited on what a CUDA trace does not show (a host function "
           "launched on the stream, another device's event)")
HELD_FIX = ("give the job the GPU to itself: list the GPU's compute processes while the steps are slow (nvidia-smi "
            "--query-compute-apps=pid,process_name,used_memory --format=csv) and move the other one, or partition the "
            "GPU (MIG) or cap the other's share (MPS active thread percentage)")


def why(ev, lo: int, hi: int, held_ns: int = 0) -> dict:
    """What the capture says about why the step's kernels were slower, or its work was held."""
    out: dict = {}
    if held_ns:
        out["held_by"] = HELD_BY + (" (NVML's per-process lists are not recorded: which one is not known)" if ev.nvml
                                    else " (no NVML samples: which one is not known)")
    clock, typical = _median_in(ev, "sm_clock_mhz", lo, hi)
    if clock is not None and typical and clock < CLOCK_DROP * typical:
        out["clocks"] = f"SM clock {clock:.0f} MHz in the step vs {typical:.0f} MHz typical"
    got = ev.nvml.get("clock_event_reasons")
    if got is not None:
        i, j = searchsorted(got[0], [lo, hi])
        bits = int(np.bitwise_or.reduce(got[1][i:j].astype(np.int64))) if j > i else 0
        from .clock_throttle import REASON_BITS
        named = [name for name, bit in REASON_BITS.items() if bits & bit]
        if named:
            out["throttle_reasons"] = named
    mem, mem_typ = _median_in(ev, "mem_used_bytes", lo, hi)
    if mem is not None and mem_typ is not None and mem - mem_typ > MEM_RISE_BYTES:
        out["other_process"] = (f"device memory in use {mem / 2**30:.1f} GiB vs {mem_typ / 2**30:.1f} GiB typical: another "
                                "allocation on the GPU, possibly another process (per-process lists not recorded)")
    if not out:
        out["not_known"] = ("no clock drop, throttle reason or memory rise recorded in the step; another process "
                            "time-slicing the GPU or memory contention cannot be told apart (NVML per-process lists "
                            "not recorded)" if ev.nvml else "no NVML samples: clocks and other processes not recorded")
    return out


def _threshold(opts, wall) -> "np.ndarray | float":
    return np.maximum(opts.min_gap_ns, MIN_FRACTION * wall)


def _held_in(ci: CheckInput) -> tuple[Intervals, dict | None]:
    """The step's held time where it counts (a complete record, at least the threshold), and
    its evidence; (empty, None) otherwise."""
    ev, step, src = ci.rank.ev, ci.step, ci.rank.src
    if not src.runtime_api:
        return measures.empty(), None
    h = held_mod.of_rank(ev, src)
    got = measures.clip(h.time, step.start_ns, step.end_ns)
    if (got.total_ns < _threshold(ci.rank.opts, step.wall_ns) or h.rank_gaps
            or held_mod.launches_unmatched(ev, h, step.start_ns, step.end_ns)):
        return measures.empty(), None
    launches = ev.rt_index.overlapping(step.start_ns, step.end_ns)
    return got, {
        "ns": got.total_ns, "longest_ns": int((got.end_ns - got.start_ns).max()),
        "basis": f"the step's launched, ready kernels and copies waited >= {held_mod.HELD_MIN_NS // 1000} us with none "
                 "of the program's work running on the GPU (diagnose/held.py)",
        "record_complete": f"{int(ev.rt_launch[launches].sum())} launch calls in the step, each with its GPU record; "
                           "other runtime calls recorded; record losses: "
                           + ("not counted in an imported trace" if src.shared_timebase else "none counted by the capture"),
        "fix": HELD_FIX,
    }


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.kernels:
        return unresolved(NAME, [NO_KERNELS])
    ev, step = ci.rank.ev, ci.step
    i, j = searchsorted(ev.k_start, [step.start_ns, step.end_ns], side="left")
    extra = extra_per_kernel(ev)
    rows = _slow_overlapping(ev, extra, step.start_ns, step.end_ns)
    held, held_ev = _held_in(ci)
    if rows.size == 0 and held_ev is None:
        return not_applicable(NAME, kernels=int(j - i), slower_kernels=0)
    claimed = measures.clip(_claims(ev, rows, extra[rows], np.full(rows.size, step.start_ns), np.full(rows.size, step.end_ns)),
                            step.start_ns, step.end_ns)
    evidence = {
        "kernels": int(j - i), "slower_kernels": int(rows.size), "slowdown_ns": claimed.total_ns,
        "basis": f"per kernel identity (name and launch shape): more than {SLOW_FACTOR}x its median duration over the "
                 f"rank's launches (at least {MIN_LAUNCHES}); more or other kernels are gpu_work's",
        "kernels_slower_ns": top_names(ev.k_name[rows], extra[rows]),
    }
    spilled = int((ev.k_start[rows] < step.start_ns).sum())
    if spilled:  # slower kernels of an earlier step still running: the part of their extra in this step is this step's
        evidence["slower_kernels_from_before"] = spilled
    if held_ev is not None:
        evidence["held"] = held_ev
        claimed = measures.union_many(claimed, held)
    if claimed.total_ns < _threshold(ci.rank.opts, step.wall_ns):
        return not_applicable(NAME, **evidence)
    evidence["why"] = why(ev, step.start_ns, step.end_ns, held.total_ns)
    return Finding(NAME, "attributed", claimed, evidence, (), held if held_ev is not None else None)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    fr, ev = si.frame, si.rank.ev
    if not si.rank.src.kernels:
        return uniform(NAME, fr.n, UNRESOLVED, (NO_KERNELS,))
    extra = extra_per_kernel(ev)
    rows = np.flatnonzero(extra > 0)
    # Each slower kernel's extra (its last `extra` ns) in whichever steps it falls: a kernel slowed
    # past its step's end spills its extra into the next step, which waited for it.
    claimed = fr.pieces(_claims(ev, rows, extra[rows], np.full(rows.size, np.iinfo(np.int64).min),
                                np.full(rows.size, np.iinfo(np.int64).max)))
    thr = _threshold(si.rank.opts, fr.wall)
    held = _held_steps(si, thr)
    if len(held):
        claimed = measures.union_many(claimed, held)
    got = fr.per_step(claimed)
    out = answer(NAME, fr, (got > 0) & (got >= thr), claimed)
    if len(held):
        out.first = held  # counted only where it alone reaches the threshold: those steps are attributed
    return out


def _held_steps(si: StepsInput, thr: np.ndarray) -> Intervals:
    """_held_in for every step: the held pieces of the steps where they count."""
    fr, ev, src = si.frame, si.rank.ev, si.rank.src
    if not src.runtime_api:
        return measures.empty()
    h = held_mod.of_rank(ev, src)
    if len(h.time) == 0 or h.rank_gaps:
        return measures.empty()
    per = fr.per_step(h.time)
    bad = np.flatnonzero(~h.launch_ok)
    _, kb = fr.overlapping(ev.rt_start[bad], ev.rt_end[bad])
    complete = np.bincount(kb, minlength=fr.n)[:fr.n] == 0
    return fr.only(h.time, (per >= thr) & complete)
