"""launch_bound: many kernels shorter than their own launch call, the host continuously launching.

Evidence required: kernels and runtime API calls joined by correlation id.
Explains: GPU idle while the submitting thread was in its launch calls or in the short host
time between two consecutive ones (the GPU drains each kernel faster than the host can
enqueue the next). A pause between launches longer than HOST_GAP_LAUNCHES x the median launch
call is host work of its own (a data transform, a Python loop): host_submission names it.
"""

from __future__ import annotations

import numpy as np

from .. import measures
from ..evidence import launch_rows
from ..types import Finding
from .base import CheckInput, attributed, not_applicable, unresolved

NAME = "launch_bound"
# Between two launches of a launch-bound loop the host runs the Python of one op: a few launch
# calls' worth (PyTorch's dispatcher ~2-3x a cudaLaunchKernel). Ten launches' worth is work of
# another kind.
HOST_GAP_LAUNCHES = 10


def check(ci: CheckInput) -> Finding:
    missing = []
    if not ci.src.kernels:
        missing.append("GPU kernels (kernels not observed)")
    if not ci.src.runtime_api:
        missing.append("host launch calls (runtime_api not observed)")
    if missing:
        return unresolved(NAME, missing)
    ev, step, opts = ci.ev, ci.step, ci.opts
    i, j = np.searchsorted(ev.k_start, [step.start_ns, step.end_ns], side="left")
    n = int(j - i)
    if n < opts.launch_bound_min_kernels:
        return not_applicable(NAME, kernels=n, min_kernels=opts.launch_bound_min_kernels)
    kcorr = ev.k_corr[i:j]
    rows, matched = launch_rows(ev, kcorr)
    if not matched.any():
        return unresolved(NAME, ["correlation ids joining kernels to their launch calls"], kernels=n)
    rt = rows[matched]
    kdur = (ev.k_end[i:j] - ev.k_start[i:j])[matched]
    ldur = ev.rt_end[rt] - ev.rt_start[rt]
    short_frac = float((kdur < ldur).mean())
    # The submitting thread: the one that issued most of this step's launches.
    threads, counts = np.unique(ev.rt_thread[rt], return_counts=True)
    tid = int(threads[np.argmax(counts)])
    near = ev.rt_index.overlapping(step.start_ns, step.end_ns)
    near = near[ev.rt_launch[near] & (ev.rt_thread[near] == tid)]
    in_launch = measures.clip(measures.union(ev.rt_start[near], ev.rt_end[near]), step.start_ns, step.end_ns)
    launch_frac = in_launch.total_ns / step.wall_ns if step.wall_ns else 0.0
    evidence = {
        "kernels": n,
        "kernels_matched_to_launch": int(matched.sum()),
        "short_kernel_fraction": round(short_frac, 6),
        "median_kernel_ns": int(np.median(kdur)),
        "median_launch_ns": int(np.median(ldur)),
        "host_in_launch_fraction": round(launch_frac, 6),
        "submitting_thread": tid,
    }
    if short_frac < opts.launch_bound_min_short_fraction or launch_frac < opts.launch_bound_min_host_launch_fraction:
        return not_applicable(NAME, **evidence)
    ls, le = ev.rt_start[near], ev.rt_end[near]
    order = np.argsort(ls, kind="stable")
    ls, le = ls[order], np.maximum.accumulate(le[order])
    pause = ls[1:] - le[:-1]
    short = (pause > 0) & (pause <= HOST_GAP_LAUNCHES * max(int(np.median(ldur)), 1))
    launching = measures.union(np.concatenate([ls, le[:-1][short]]), np.concatenate([le, ls[1:][short]]))
    claimed = measures.intersect(ci.base.idle, measures.clip(launching, step.start_ns, step.end_ns))
    evidence["host_pauses_left_to_host_ns"] = int(pause[(pause > 0) & ~short].sum())
    return attributed(NAME, claimed, **evidence)
