"""launch_bound: many short kernels launched one by one, the GPU draining each faster than the
host launches the next (a Python loop of 3,000 tiny elementwise ops, an unfused optimizer).

Evidence required: kernels and runtime API calls joined by correlation id.
Attributed where the step has >= launch_bound_min_kernels kernels, >= launch_bound_min_short_fraction
of them shorter than the interval from their launch to the thread's next launch (the GPU
went idle before the next kernel arrived: kernel durations against the launch gaps), and the
launch loop (the submitting thread's launch calls and the short host pauses between two of
them) covers >= launch_bound_min_host_launch_fraction of the step. The Python of each op
between its launches (PyTorch's dispatcher: a few launch calls' worth) is part of the loop:
the lever is fewer launches (fuse, foreach ops, torch.compile, CUDA graphs), not shorter host
work. The evidence gives the launch rate, the median kernel and the median launch interval.
Explains: GPU idle inside the launch loop. A pause between launches longer than
HOST_GAP_LAUNCHES x the median launch call is host work of its own (a data transform, a
Python loop without launches): host_submission names it.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..batch import ATTRIBUTED, NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, uniform
from ..evidence import launch_rows_at
from ..fast import searchsorted
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "launch_bound"
# Between two launches of a launch-bound loop the host runs the Python of one op: a few launch
# calls' worth (PyTorch's dispatcher ~2-3x a cudaLaunchKernel). Ten launches' worth is work of
# another kind.
HOST_GAP_LAUNCHES = 10
FIX = ("launch fewer kernels: fuse the loop's ops (torch.compile), use foreach/fused ops (torch._foreach_*, "
       "fused optimizers), or capture the loop once in a CUDA graph (torch.cuda.graphs, torch.compile mode='reduce-overhead')")


def to_next_launch(ev, rows: np.ndarray) -> np.ndarray:
    """Per launch call row: the time from its start to the start of the same thread's next
    launch call; where there is none, the call's own length."""
    out = ev.rt_end[rows] - ev.rt_start[rows]
    lrows = np.flatnonzero(ev.rt_launch)
    for tid in np.unique(ev.rt_thread[rows]).tolist():  # threads are few
        mine = lrows[ev.rt_thread[lrows] == tid]  # in start order (rows are)
        st = ev.rt_start[mine]
        m = np.flatnonzero(ev.rt_thread[rows] == tid)
        p = searchsorted(mine, rows[m], side="right")  # the next launch row of the thread
        has = p < mine.size
        out[m[has]] = st[p[has]] - ev.rt_start[rows[m[has]]]
    return out


def _missing(src) -> list[str]:
    """What the check needs and the rank lacks (both paths)."""
    missing = []
    if not src.kernels:
        missing.append("GPU kernels (kernels not observed)")
    if not src.runtime_api:
        missing.append("host launch calls (runtime_api not observed)")
    return missing


def describe(ci: CheckInput) -> Finding:
    missing = _missing(ci.rank.src)
    if missing:
        return unresolved(NAME, missing)
    ev, step, opts = ci.rank.ev, ci.step, ci.rank.opts
    i, j = searchsorted(ev.k_start, [step.start_ns, step.end_ns], side="left")
    n = int(j - i)
    if n < opts.launch_bound_min_kernels:
        return not_applicable(NAME, kernels=n, min_kernels=opts.launch_bound_min_kernels)
    kcorr = ev.k_corr[i:j]
    rows, matched = launch_rows_at(ev, kcorr, ev.k_start[i:j])
    if not matched.any():
        return unresolved(NAME, ["correlation ids joining kernels to their launch calls"], kernels=n)
    rt = rows[matched]
    kdur = (ev.k_end[i:j] - ev.k_start[i:j])[matched]
    ldur = ev.rt_end[rt] - ev.rt_start[rt]
    interval = to_next_launch(ev, rt)
    short_frac = float((kdur < interval).mean())
    # The submitting thread: the one that issued most of this step's launches.
    threads, counts = np.unique(ev.rt_thread[rt], return_counts=True)
    tid = int(threads[np.argmax(counts)])
    near = ev.rt_index.overlapping(step.start_ns, step.end_ns)
    near = near[ev.rt_launch[near] & (ev.rt_thread[near] == tid)]
    ls, le = ev.rt_start[near], ev.rt_end[near]
    order = np.argsort(ls, kind="stable")
    ls, le = ls[order], np.maximum.accumulate(le[order])
    pause = ls[1:] - le[:-1]
    short = (pause > 0) & (pause <= HOST_GAP_LAUNCHES * max(int(np.median(ldur)), 1))
    launching = measures.clip(measures.union(np.concatenate([ls, le[:-1][short]]), np.concatenate([le, ls[1:][short]])),
                              step.start_ns, step.end_ns)
    launch_frac = launching.total_ns / step.wall_ns if step.wall_ns else 0.0
    evidence = {
        "kernels": n,
        "kernels_matched_to_launch": int(matched.sum()),
        "short_kernel_fraction": round(short_frac, 6),
        "median_kernel_ns": int(np.median(kdur)),
        "median_launch_ns": int(np.median(ldur)),
        "median_launch_interval_ns": int(np.median(interval)),
        "launches_per_ms": round(int(near.size) / (launching.total_ns / 1e6), 3) if launching.total_ns else 0.0,
        "host_in_launch_fraction": round(launch_frac, 6),
        "submitting_thread": tid,
    }
    if short_frac < opts.launch_bound_min_short_fraction or launch_frac < opts.launch_bound_min_host_launch_fraction:
        return not_applicable(NAME, **evidence)
    claimed = measures.intersect(ci.base.idle, launching)
    evidence["host_pauses_left_to_host_ns"] = int(pause[(pause > 0) & ~short].sum())
    evidence["fix"] = FIX
    return attributed(NAME, claimed, **evidence)


def _grouped_median_int(g: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """int(np.median(v[g == k])) for every group k (0 where empty)."""
    order = np.lexsort((v, g))
    gs, vs = g[order], v[order]
    lo = searchsorted(gs, np.arange(n), side="left")
    hi = searchsorted(gs, np.arange(n), side="right")
    cnt = hi - lo
    a = vs[np.minimum(lo + (cnt - 1) // 2, max(vs.size - 1, 0))] if vs.size else np.zeros(n, np.int64)
    b = vs[np.minimum(lo + cnt // 2, max(vs.size - 1, 0))] if vs.size else np.zeros(n, np.int64)
    med = (a.astype(float) + b.astype(float)) / 2  # np.median of two middles: their mean
    return np.where(cnt > 0, med, 0).astype(np.int64)


def _running_max_by_group(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """np.maximum.accumulate of v within each run of equal g (g ascending): values are replaced
    by their ranks so that group offsets cannot overflow."""
    if v.size == 0:
        return v
    uniq, r = np.unique(v, return_inverse=True)
    width = np.int64(uniq.size + 1)
    key = g.astype(np.int64) * width + r
    return uniq[np.maximum.accumulate(key) - g.astype(np.int64) * width]


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    missing = _missing(si.rank.src)
    fr, ev, opts = si.frame, si.rank.ev, si.rank.opts
    n = fr.n
    if missing:
        return uniform(NAME, n, UNRESOLVED, tuple(missing))
    # Kernels by the step their start falls in (searchsorted on the step window, as per step).
    ks = fr.step_of(ev.k_start)
    inside = ks >= 0
    kidx = np.flatnonzero(inside)
    kstep = ks[inside]
    count = np.bincount(kstep, minlength=n)[:n]
    rows, matched = launch_rows_at(ev, ev.k_corr[kidx], ev.k_start[kidx])
    many = count >= opts.launch_bound_min_kernels
    any_matched = np.bincount(kstep[matched], minlength=n)[:n] > 0
    verdict = np.full(n, NOT_APPLICABLE, np.int8)
    codes = np.zeros(n, np.int32)
    verdict[many & ~any_matched] = UNRESOLVED
    codes[many & ~any_matched] = 1
    out_missing = [(), ("correlation ids joining kernels to their launch calls",)]
    cand = many & any_matched
    if not cand.any():
        return StepFindings(NAME, verdict, measures.empty(), out_missing, codes)
    mk = kidx[matched]
    mstep = kstep[matched]
    rt = rows[matched]
    keep = cand[mstep]
    mk, mstep, rt = mk[keep], mstep[keep], rt[keep]
    kdur = ev.k_end[mk] - ev.k_start[mk]
    ldur = ev.rt_end[rt] - ev.rt_start[rt]
    nmatched = np.bincount(mstep, minlength=n)[:n]
    short_frac = np.bincount(mstep, weights=(kdur < to_next_launch(ev, rt)), minlength=n)[:n] / np.maximum(nmatched, 1)
    # The submitting thread: most launches in the step, the lowest thread id on a tie (np.unique's order).
    thr = ev.rt_thread[rt]
    # (step, thread) pairs as one int64 key (step major, then the thread's rank among the
    # threads): np.unique over a 2-row stack with axis=1 sorts structured rows, ~0.2 s of a
    # 1M-event trace's 0.65 s diagnosis; the same pairs in the same order.
    tu, tcode = np.unique(thr, return_inverse=True)
    ukey, pc = np.unique(mstep.astype(np.int64) * np.int64(tu.size) + tcode.reshape(-1), return_counts=True)
    pairs = np.stack([ukey // tu.size, tu[ukey % tu.size]])
    best = np.lexsort((pairs[1], -pc, pairs[0]))
    first = np.ones(best.size, bool)
    first[1:] = pairs[0][best][1:] != pairs[0][best][:-1]
    tid = np.zeros(n, np.int64)
    tid[pairs[0][best][first]] = pairs[1][best][first]
    # That thread's launch calls overlapping the step: its launch loop, each call in start
    # order with its running end, the short pauses between consecutive calls bridged.
    lrows = np.flatnonzero(ev.rt_launch)
    wi, wk = fr.overlapping(ev.rt_start[lrows], ev.rt_end[lrows])
    mine = cand[wk] & (ev.rt_thread[lrows][wi] == tid[wk])
    nr, nk = lrows[wi[mine]], wk[mine]
    order = np.lexsort((np.arange(nr.size), ev.rt_start[nr], nk))
    nr, nk = nr[order], nk[order]
    ls, le = ev.rt_start[nr], _running_max_by_group(nk, ev.rt_end[nr])
    med = _grouped_median_int(mstep, ldur, n)
    same = nk[1:] == nk[:-1]
    pause = ls[1:] - le[:-1]
    short = same & (pause > 0) & (pause <= HOST_GAP_LAUNCHES * np.maximum(med[nk[1:]], 1))
    s = np.concatenate([ls, le[:-1][short]])
    e = np.concatenate([le, ls[1:][short]])
    g = np.concatenate([nk, nk[1:][short]])
    launching = measures.union(np.maximum(s, fr.starts[g]), np.minimum(e, fr.ends[g]))
    wall = fr.wall
    launch_frac = np.where(wall > 0, fr.per_step(launching) / np.maximum(wall, 1), 0.0)
    att = cand & (short_frac >= opts.launch_bound_min_short_fraction) & (launch_frac >= opts.launch_bound_min_host_launch_fraction)
    verdict[att] = ATTRIBUTED
    claimed = measures.intersect(si.base.idle, launching)
    return StepFindings(NAME, verdict, fr.only(claimed, att), out_missing, codes)
