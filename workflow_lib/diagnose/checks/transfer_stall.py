"""transfer_stall: a copy or memset was on the critical path: the GPU's compute waited on it,
or the host blocked on it and the GPU went idle behind the host.

Evidence required: memcpy rows (GPU activity) and, for the host side, the runtime calls that
issued them (joined by correlation id). The memory kinds (pageable, pinned, device, managed)
and async flag come from CUPTI's memcpy record or Kineto's event name
("Memcpy HtoD (Pageable -> Device)"); where they were not observed the kind is "copy".
Explains, per step, time with no kernel running (copy-engine time is not compute):
  * during a copy that held up the next kernel on its stream: that kernel was launched before
    the copy ended and started after it (it waited in the queue, e.g. behind a DtoH pack on
    the training stream); without correlation ids, a kernel starting within min_gap_ns of
    the copy's end. A copy nothing waited for (a prefetch on a side stream) is not claimed;
  * while the host was blocked in the issuing call (a synchronous cudaMemcpy or cudaMemset,
    or an async copy from pageable memory, which the driver stages through a bounce buffer
    while the host waits), plus the idle after it returned only as far as the call delayed
    the next launch (checks/base.call_windows);
  * for a device->host read the host waited for (`.item()`, `.cpu()`, `.tolist()`: torch
    issues cudaMemcpyAsync into a pinned staging buffer, then cudaStreamSynchronize): the
    issuing call and the synchronizing calls the same thread made after it before its next
    launch, with the idle after them as above. The sync waited for this copy, so the read is
    the cause and its fix is the read's (FIXES["sync_dtoh"]); sync_stall keeps the syncs that
    waited for kernels only. Where the trace names the op that made the read (a span of the
    issuing thread holding that read and no other CUDA work: Kineto's `aten::item`), the op's
    host time is the read's too (_read_op_spans).
Each copy gets one of the kinds below, the fix that kind needs, and its bandwidth against the
link's nominal (LINK_NOMINAL_GBPS) and against the best a non-pageable copy of the same
direction reached in the step.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pa_compute

from ...core.vocabulary import base_name
from .. import measures
from ..batch import NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, answer, uniform
from ..evidence import launch_rows_at
from ..lanes import Lanes
from ..fast import searchsorted
from ..types import Finding, Intervals
from . import base_steps
from .base import CheckInput, attributed, call_windows, not_applicable, unresolved

NAME = "transfer_stall"

# What to change, per kind of copy (next_experiments picks the kind that explains most).
FIXES = {
    "pageable": "pin the host memory and copy asynchronously: DataLoader(pin_memory=True) and .to(device, non_blocking=True)",
    "sync_dtoh": "keep device->host reads off the training thread: no per-step .item()/.cpu()/.tolist(); accumulate "
                 "metrics on the GPU and read them every N steps, or defer them to a logging thread",
    "dtoh_pack": "move the device->host pack off the training stream: copy on a side stream (torch.cuda.Stream) into "
                 "a pinned buffer, ordered by an event",
    "sync_memset": "use an asynchronous memset on the step's stream (cudaMemsetAsync; torch.zeros on the device)",
    "copy": "overlap the copy with compute: issue it earlier on a side stream from pinned memory (prefetch)",
}
# Nominal one-direction bandwidth of the link a copy crosses, GB/s: PCIe 5.0 x16 (H100/H200
# PCIe and the host link of SXM parts) for host copies; NVLink 4 (900 GB/s both directions)
# for peer copies. Device-local copies run at HBM speed and have no link.
LINK_NOMINAL_GBPS = {"HtoD": 64.0, "DtoH": 64.0, "PtoP": 450.0}
LINK_NAME = {"HtoD": "PCIe 5.0 x16", "DtoH": "PCIe 5.0 x16", "PtoP": "NVLink 4"}
# A host copy whose memory kinds were not recorded (a capture without copy kinds, a trace
# that names only "Memcpy HtoD") and that ran below this fraction of its link's nominal rate
# is read as pageable, probably: pageable copies go through the driver's bounce buffer at
# 3-12 GB/s on PCIe 5.0 x16 (3.35 GB/s for a 425 MB copy on the H200), pinned ones at 40-55.
# The host waited for it (the staging holds the issuing call) and nothing could run behind
# it on its stream, so its compute-free time is on the critical path whatever the launches say.
PAGEABLE_GUESS_FRACTION = 0.25
# Below this size a copy's rate is its latency, not its memory kind (a 4 KB pinned copy runs at
# well under 1 GB/s): no guess is made.
PAGEABLE_GUESS_MIN_BYTES = 1 << 20


def guessed_pageable(c, rows: np.ndarray) -> np.ndarray:
    """Per copy row: its kinds were not recorded, and it is a host copy of at least
    PAGEABLE_GUESS_MIN_BYTES that ran below PAGEABLE_GUESS_FRACTION of the link's rate."""
    kind = c.kind[rows]
    unknown = (c.src_kind[rows] == "") & (c.dst_kind[rows] == "")
    host = (kind == "HtoD") | (kind == "DtoH")
    dur = c.end[rows] - c.start[rows]
    nb = c.nbytes[rows]
    slow = nb < PAGEABLE_GUESS_FRACTION * LINK_NOMINAL_GBPS["HtoD"] * np.maximum(dur, 1)  # bytes/ns = GB/s
    return unknown & host & (nb >= PAGEABLE_GUESS_MIN_BYTES) & (dur > 0) & slow


def _guess_text(nbytes: int, dur_ns: int, direction: str) -> str:
    return (f"pageable, probably: {nbytes / max(dur_ns, 1):.2f} GB/s on a {LINK_NOMINAL_GBPS[direction]:g} GB/s link "
            f"({LINK_NAME[direction]}); the memory kinds were not recorded")


def kind_of(kind: str, src: str, dst: str, is_async: int, host_blocked: bool) -> str:
    """One copy's kind, the key of FIXES."""
    if kind == "memset":
        return "sync_memset" if is_async == 0 or host_blocked else "copy"
    if kind == "DtoH" and (dst == "pageable" or is_async == 0 or host_blocked):
        return "sync_dtoh"
    if "pageable" in (src, dst):
        return "pageable"
    if kind == "DtoH":
        return "dtoh_pack"
    return "copy"


_COPY_CALL = re.compile(r"mem(cpy|set)", re.IGNORECASE)


def _kinds(c, r: int, guess: bool) -> tuple[str, str]:
    """A copy's (src, dst) memory kinds, "pageable" on the host side where guessed_pageable."""
    src, dst = str(c.src_kind[r]), str(c.dst_kind[r])
    if guess:
        return ("pageable", "device") if c.kind[r] == "HtoD" else ("device", "pageable")
    return src, dst


def _held_up_a_kernel(ci: CheckInput, rows: np.ndarray) -> np.ndarray:
    """Per copy: did the next kernel on its stream wait for it (launched before the copy ended,
    started at or after its end)? Without a launch to compare with, a kernel that starts
    within min_gap_ns of the copy's end counts as waiting."""
    ev, c = ci.rank.ev, ci.rank.ev.copies
    out = np.zeros(rows.size, bool)
    for k, r in enumerate(rows.tolist()):  # copies of one step: a handful
        j = int(searchsorted(ev.k_start, c.end[r], side="left"))
        same = np.flatnonzero(ev.k_stream[j:j + _LOOKAHEAD] == c.stream[r])
        if same.size == 0:
            continue
        nk = j + int(same[0])
        if ev.k_start[nk] >= ci.step.end_ns:
            continue
        row, ok = launch_rows_at(ev, ev.k_corr[nk:nk + 1], ev.k_start[nk:nk + 1])
        if ok[0]:
            out[k] = ev.rt_start[row[0]] < c.end[r]
        else:
            out[k] = ev.k_start[nk] - c.end[r] < ci.rank.opts.min_gap_ns
    return out


# Kernels looked at after a copy's end for the next one on its stream (other streams' kernels
# interleave; a stream's next kernel is among the next few hundred on a busy GPU).
_LOOKAHEAD = 512


def _holds_host(call: str) -> bool:
    """cudaMemcpy / cudaMemset / hipMemcpyWithStream return when the copy is done; a copy
    issued by another call (cudaGraphLaunch, a kernel) does not hold the host."""
    name = base_name(call)
    return _COPY_CALL.search(name) is not None and "async" not in name.lower()


def _host_blocking(ev, crow: np.ndarray, matched: np.ndarray, c, rows: np.ndarray) -> np.ndarray:
    """Per copy: did the issuing call hold the host (synchronous call, or pageable staging)?"""
    out = np.zeros(rows.size, bool)
    for k in np.flatnonzero(matched):  # copies of one step: a handful
        sync_call = _holds_host(str(ev.rt_name[crow[k]]))
        pageable = "pageable" in (c.src_kind[rows[k]], c.dst_kind[rows[k]])
        out[k] = sync_call or pageable or c.is_async[rows[k]] == 0
    return out


def _waiting_syncs(ev, crow: np.ndarray, matched: np.ndarray, c, rows: np.ndarray, hi: int) -> list[np.ndarray]:
    """Per copy: the synchronizing calls that waited for it, for a device->host copy: those
    the issuing thread made after the issuing call returned and before its next launch (the
    read's value was needed at once). Empty for other copies."""
    out = [np.zeros(0, np.int64)] * rows.size
    for k in np.flatnonzero(matched):  # copies of one step: a few hundred at most
        if c.kind[rows[k]] != "DtoH":
            continue
        r = crow[k]
        tid, after = ev.rt_thread[r], ev.rt_end[r]
        near = ev.rt_index.overlapping(after, hi)
        near = near[(ev.rt_thread[near] == tid) & (ev.rt_start[near] >= after)]
        if near.size == 0:
            continue
        launches = near[ev.rt_launch[near]]
        until = ev.rt_start[launches].min() if launches.size else hi
        out[k] = near[ev.rt_sync[near] & (ev.rt_start[near] < until)]
    return out


def _read_op_spans(ev, crow: np.ndarray, read: np.ndarray) -> dict[int, Intervals]:
    """Per read (a device->host copy the host waited for), the host span of the op that made
    the read, where the trace names one: the outermost span of the issuing thread that
    contains the issuing call and no other CUDA work of that thread (no launch, no other copy
    or memset). Under torch.profiler that is `aten::item` (around `aten::_local_scalar_dense`,
    around the copy and its sync): its host time outside the two calls (0.60 of 1.91 ms over
    128 reads in the H200 Kineto capture's step 15) is the read's own op and goes with the
    read's fix, not the host's submission of other work. A span around several reads or any
    launch (the user's `metrics.per_sample`, `forward`) is named work of its own and keeps it.
    {copy index: its op's interval}; none for a read without such a span (the recorder form)."""
    out = {}
    for k in np.flatnonzero(read).tolist():  # reads of one step: a few hundred at most
        r = int(crow[k])
        tid = ev.rt_thread[r]
        spans = ev.span_index.containing(int(ev.rt_start[r]))
        spans = spans[(ev.span_thread[spans] == tid) & (ev.span_end[spans] >= ev.rt_end[r])]
        best = None
        for s in spans[np.argsort(-ev.span_depth[spans], kind="stable")].tolist():  # innermost first
            a, b = int(ev.span_start[s]), int(ev.span_end[s])
            inner = ev.rt_index.overlapping(a, b)
            inner = inner[(ev.rt_thread[inner] == tid) & (ev.rt_start[inner] >= a) & (ev.rt_end[inner] <= b)]
            own = (inner == r) | ev.rt_sync[inner]
            other = ~own & (ev.rt_launch[inner] | np.array([_COPY_CALL.search(str(n)) is not None
                                                            for n in ev.rt_name[inner]], bool))
            if other.any():
                break
            best = (a, b)
        if best is not None:
            out[k] = measures.as_intervals([best[0]], [best[1]])
    return out


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.kernels:
        return unresolved(NAME, ["GPU activity (kernels/memcpy not observed)"])
    ev, step = ci.rank.ev, ci.step
    c = ev.copies
    rows = c.in_window(step.start_ns, step.end_ns)
    if rows.size == 0:
        return not_applicable(NAME, copies=0)
    lo, hi = step.start_ns, step.end_ns
    copy_iv = measures.clip(measures.union(c.start[rows], c.end[rows]), lo, hi)
    no_compute = measures.subtract(measures.as_intervals([lo], [hi]), measures.clip(ev.kernel_busy, lo, hi))
    guess = guessed_pageable(c, rows)
    delaying = _held_up_a_kernel(ci, rows) | guess
    gpu_waited = measures.intersect(no_compute, measures.clip(measures.union(c.start[rows[delaying]], c.end[rows[delaying]]), lo, hi))
    crow, matched = launch_rows_at(ev, c.corr[rows], c.start[rows]) if ci.rank.src.runtime_api else (np.zeros(rows.size, np.int64), np.zeros(rows.size, bool))
    blocking = _host_blocking(ev, crow, matched, c, rows) | (guess & matched)
    waits = _waiting_syncs(ev, crow, matched, c, rows, hi) if ci.rank.src.runtime_api else [np.zeros(0, np.int64)] * rows.size
    read = np.array([w.size > 0 for w in waits], bool)
    blocking |= read
    host_side = measures.empty()
    ops: dict[int, Intervals] = {}
    if blocking.any():
        calls = np.unique(np.concatenate([crow[blocking]] + [w for w in waits if w.size]))
        _, windows = call_windows(ci, calls, refill=True)
        ops = _read_op_spans(ev, crow, read & matched)
        if ops:
            windows = measures.union_many(windows, measures.clip(measures.union_many(*ops.values()), lo, hi))
        host_side = measures.intersect(no_compute, windows)
    claimed = measures.union_many(gpu_waited, host_side)
    # Per copy: its own critical time (compute-free copy time + host-blocked idle in its call).
    by_kind: dict[str, dict] = {}
    best: dict[str, float] = {}
    for k, r in enumerate(rows.tolist()):  # copies of one step: a handful
        src_k, dst_k = _kinds(c, r, bool(guess[k]))
        kind = kind_of(str(c.kind[r]), src_k, dst_k, int(c.is_async[r]), bool(blocking[k]))
        dur = int(c.end[r] - c.start[r])
        one = measures.clip(measures.as_intervals([c.start[r]], [c.end[r]]), lo, hi)
        crit = measures.intersect(gpu_waited, one).total_ns if delaying[k] else 0
        if read[k]:
            _, own = call_windows(ci, np.concatenate([[crow[k]], waits[k]]), refill=True)
            if k in ops:
                own = measures.union_many(own, measures.clip(ops[k], lo, hi))
            crit = max(crit, measures.intersect(no_compute, own).total_ns)
        elif blocking[k]:
            call = measures.clip(measures.as_intervals([ev.rt_start[crow[k]]], [ev.rt_end[crow[k]]]), lo, hi)
            crit = max(crit, measures.intersect(no_compute, call).total_ns)
        b = by_kind.setdefault(kind, {"copies": 0, "bytes": 0, "copy_ns": 0, "critical_ns": 0, "direction": {}, "streams": [],
                                      "fix": FIXES[kind]})
        if int(c.stream[r]) not in b["streams"] and len(b["streams"]) < 8:
            b["streams"].append(int(c.stream[r]))
        b["copies"] += 1
        if guess[k]:
            b["guessed_copies"] = b.get("guessed_copies", 0) + 1
            b["kind_basis"] = _guess_text(int(c.nbytes[r]), dur, str(c.kind[r]))
        b["copy_ns"] += dur
        b["critical_ns"] += int(crit)
        direction = str(c.kind[r])
        b["direction"][direction] = b["direction"].get(direction, 0) + 1
        if c.nbytes[r] > 0:
            b["bytes"] += int(c.nbytes[r])
            if dur > 0 and kind != "pageable" and not guess[k]:
                best[direction] = max(best.get(direction, 0.0), c.nbytes[r] / dur)
    for kind, b in by_kind.items():
        d = max(b["direction"], key=b["direction"].get)
        if b["bytes"] and b["copy_ns"]:
            b["bandwidth_gbps"] = round(b["bytes"] / b["copy_ns"], 3)  # bytes/ns = GB/s
        if d in LINK_NOMINAL_GBPS:
            b["link"] = LINK_NAME[d]
            b["link_nominal_gbps"] = LINK_NOMINAL_GBPS[d]
            if b["bytes"]:
                # The bound: at the link's rate the copy itself would take this long.
                b["at_link_ns"] = int(b["bytes"] / LINK_NOMINAL_GBPS[d])
        if d in best:
            b["best_in_step_gbps"] = round(best[d], 3)
    evidence = {
        "copies": int(rows.size), "copy_ns": copy_iv.total_ns, "gpu_compute_waited_ns": gpu_waited.total_ns,
        "host_blocked_idle_ns": host_side.total_ns, "by_kind": by_kind,
        "dominant_kind": max(by_kind, key=lambda k: by_kind[k]["critical_ns"]),
    }
    if claimed.total_ns < ci.rank.opts.min_gap_ns:
        evidence["note"] = "copies ran beside kernels or the host: none on the critical path"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)


# All steps of a rank at once (diagnose/batch.py): the rules above over (copy, step) pairs, one
# pair per copy and step it overlaps: the verdicts and credit of every step (describe() gives
# the evidence of the steps kept in detail; tests/test_diagnose_batch.py holds the two equal).

_FAR = np.iinfo(np.int64).max


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once."""
    fr, ev, opts = si.frame, si.rank.ev, si.rank.opts
    if not si.rank.src.kernels:
        return uniform(NAME, fr.n, UNRESOLVED, ("GPU activity (kernels/memcpy not observed)",))
    c = ev.copies
    pc, pk = fr.overlapping(c.start, c.end)
    keep = c.reached_from(pc, fr.starts[pk])
    pc, pk = pc[keep], pk[keep]
    if pc.size == 0:
        return uniform(NAME, fr.n, NOT_APPLICABLE)
    lo, hi = fr.starts[pk], fr.ends[pk]
    no_compute = fr.pieces(measures.subtract(fr.windows, ev.kernel_busy))
    guess = guessed_pageable(c, pc)
    delaying = _held_up_steps(si, pc, hi) | guess
    cs, ce = np.maximum(c.start[pc], lo), np.minimum(c.end[pc], hi)
    gpu_waited = measures.intersect(no_compute, measures.union(cs[delaying], ce[delaying]))
    if si.rank.src.runtime_api:  # the issuing call of each copy, and the syncs that waited for a read
        crow, matched = launch_rows_at(ev, c.corr, c.start)
        wrow, wpair = _waiting_syncs_steps(si, pc, pk, crow, matched)
    else:
        crow, matched = np.zeros(c.start.size, np.int64), np.zeros(c.start.size, bool)
        wrow = wpair = np.zeros(0, np.int64)
    read = np.bincount(wpair, minlength=pc.size) > 0
    blocking = _host_blocking_all(ev, crow, matched, c)[pc] | read | (guess & matched[pc])
    rp = np.flatnonzero(read)
    op = _read_ops(ev, crow[pc[rp]])  # (has, start, end) per read pair
    host_side = measures.empty()
    if blocking.any():
        rows = np.concatenate([crow[pc[blocking]], wrow])
        steps = np.concatenate([pk[blocking], pk[wpair]])
        lanes = Lanes.of_steps(fr, np.unique(steps))
        _, windows = base_steps.lane_call_windows(si, lanes, rows, searchsorted(lanes.step, steps), refill=True)
        has = op[0]
        ops = lanes.place(op[1][has], op[2][has], searchsorted(lanes.step, pk[rp[has]]))
        host_side = measures.intersect(no_compute, measures.union_many(windows, ops))
    claimed = measures.union_many(gpu_waited, host_side)
    att = base_steps.has_any(fr, pk) & (fr.per_step(claimed) >= opts.min_gap_ns)
    found = answer(NAME, fr, att, claimed)
    sel = att[pk]  # next_experiments reads the kinds of attributed steps only
    if sel.any():
        # Per copy, as describe()'s by_kind loop: its compute-free time if a kernel waited for it,
        # or more, the compute-free time in its call (a blocking copy) or in its own windows (a read).
        crit = np.zeros(pc.size, np.int64)
        d = np.flatnonzero(sel & delaying)
        crit[d] = measures.covered_between(no_compute, cs[d], ce[d])
        b = np.flatnonzero(sel & blocking & ~read)
        call = crow[pc[b]]
        crit[b] = np.maximum(crit[b], measures.covered_between(no_compute, np.maximum(ev.rt_start[call], lo[b]),
                                                               np.minimum(ev.rt_end[call], hi[b])))
        mine = sel[rp]
        r = rp[mine]
        own = _read_own_ns(si, no_compute, r, pk[r], crow[pc[r]], wrow, wpair, tuple(x[mine] for x in op))
        crit[r] = np.maximum(crit[r], own)
        found.kinds_ns = _by_kind(c, pc, pk, sel, blocking, crit, guess)
    return found


def _held_up_steps(si: StepsInput, pc: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """_held_up_a_kernel for (copy, step) pairs: the next kernel on the copy's stream (among the
    next _LOOKAHEAD kernels after its end) starts before the step's end and waited for it."""
    ev, c = si.rank.ev, si.rank.ev.copies
    out = np.zeros(pc.size, bool)
    if ev.k_start.size == 0:
        return out
    end = c.end[pc]
    j = searchsorted(ev.k_start, end, side="left")
    nk = np.full(pc.size, -1, np.int64)
    stream = c.stream[pc]
    for st in np.unique(stream).tolist():  # streams are few
        m = stream == st
        on = np.flatnonzero(ev.k_stream == st)  # that stream's kernels in start order
        if on.size == 0:
            continue
        p = searchsorted(on, j[m], side="left")
        cand = on[np.minimum(p, on.size - 1)]
        nk[m] = np.where((p < on.size) & (cand - j[m] < _LOOKAHEAD), cand, -1)
    k = np.maximum(nk, 0)
    row, ok = launch_rows_at(ev, ev.k_corr[k], ev.k_start[k])
    before = ev.rt_start[row] < end if ev.rt_start.size else np.zeros(pc.size, bool)
    waited = np.where(ok, before, ev.k_start[k] - end < si.rank.opts.min_gap_ns)
    return (nk >= 0) & (ev.k_start[k] < hi) & waited


def _host_blocking_all(ev, crow: np.ndarray, matched: np.ndarray, c) -> np.ndarray:
    """_host_blocking for every copy of the rank."""
    if not matched.any():
        return np.zeros(matched.size, bool)
    holds = ev.rt_name.where(_holds_host)[crow]
    pageable = (c.src_kind == "pageable") | (c.dst_kind == "pageable")
    return matched & (holds | pageable | (c.is_async == 0))


def _waiting_syncs_steps(si: StepsInput, pc: np.ndarray, pk: np.ndarray, crow: np.ndarray,
                         matched: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_waiting_syncs for (copy, step) pairs: (sync call rows, the pair each waited for). For
    a device->host copy: the issuing thread's synchronizing calls starting after the issuing
    call returned (a call of no length at that instant is not after it: the per-step rule's
    `end > after`), before that thread's next launch and the step's end."""
    ev, c = si.rank.ev, si.rank.ev.copies
    cand = np.flatnonzero(matched[pc] & (c.kind[pc] == "DtoH"))
    if cand.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    r = crow[pc[cand]]
    after, hi, tid = ev.rt_end[r], si.frame.ends[pk[cand]], ev.rt_thread[r]
    rows_out, pairs_out = [], []
    for t in np.unique(tid).tolist():  # threads are few
        m = np.flatnonzero(tid == t)
        mine = np.flatnonzero(ev.rt_thread == t)  # the thread's calls in start order
        st, en = ev.rt_start[mine], ev.rt_end[mine]
        a, h = after[m], hi[m]
        p0 = searchsorted(st, a, side="left")
        pe = searchsorted(st, a, side="right")  # calls in [p0, pe) start at `a`: after it only with a length
        positive = en > st
        launch = ev.rt_launch[mine]
        lp = np.concatenate([[0], np.cumsum(launch & positive)])
        until = h.copy()
        lpos = np.flatnonzero(launch)
        if lpos.size:
            q = searchsorted(lpos, pe, side="left")
            nxt = np.where(q < lpos.size, st[lpos[np.minimum(q, lpos.size - 1)]], h)
            until = np.minimum(nxt, h)
        until = np.where(lp[pe] - lp[p0] > 0, a, until)  # a launch at that very instant
        upos = searchsorted(st, until, side="left")
        spos = np.flatnonzero(ev.rt_sync[mine])
        s0 = searchsorted(spos, p0, side="left")
        cnt = np.where(h > a, np.maximum(searchsorted(spos, upos, side="left") - s0, 0), 0)
        which = np.repeat(np.arange(cnt.size), cnt)
        pos = spos[np.repeat(s0, cnt) + (np.arange(which.size) - np.repeat(np.cumsum(cnt) - cnt, cnt))]
        ok = (pos >= pe[which]) | positive[pos]
        rows_out.append(mine[pos[ok]])
        pairs_out.append(cand[m[which[ok]]])
    return np.concatenate(rows_out), np.concatenate(pairs_out)


def _range_min(arr: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """min(arr[lo:hi]) per range (_FAR where empty), in time linear in the ranges' lengths."""
    out = np.full(lo.size, _FAR, np.int64)
    m = np.flatnonzero(hi > lo)
    if m.size:
        o = m[np.argsort(lo[m], kind="stable")]  # ranges by start: the gaps between them sum to len(arr)
        idx = np.empty(2 * o.size, np.int64)
        idx[0::2], idx[1::2] = lo[o], hi[o]
        out[o] = np.minimum.reduceat(np.append(arr, _FAR), idx)[0::2]
    return out


def _read_ops(ev, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_read_op_spans for many reads at once: per issuing call in `calls`, (whether a read op
    span was found, its start, its end)."""
    uniq, inv = np.unique(calls, return_inverse=True)
    has = np.zeros(uniq.size, bool)
    a_out, b_out = np.zeros(uniq.size, np.int64), np.zeros(uniq.size, np.int64)
    if uniq.size == 0 or ev.span_start.size == 0:
        return has[inv], a_out[inv], b_out[inv]
    other = (ev.rt_launch | ev.rt_name.matches(_COPY_CALL)) & ~ev.rt_sync  # other CUDA work, syncs aside
    for t in np.unique(ev.rt_thread[uniq]).tolist():  # threads are few
        ri = np.flatnonzero(ev.rt_thread[uniq] == t)
        rs, re = ev.rt_start[uniq[ri]], ev.rt_end[uniq[ri]]  # in start order (rows are)
        sp = np.flatnonzero(ev.span_thread == t)
        sa, sb = ev.span_start[sp], ev.span_end[sp]
        # (span, read) for every span of the thread holding the read's call: start <= call start < end, end >= call end
        i0 = searchsorted(rs, sa, side="left")
        cnt = np.maximum(searchsorted(rs, sb, side="left") - i0, 0)
        j = np.repeat(np.arange(sp.size), cnt)
        i = np.repeat(i0, cnt) + (np.arange(j.size) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        keep = sb[j] >= re[i]
        j, i = j[keep], i[keep]
        if j.size == 0:
            continue
        # Other work inside a span [a, b]: start >= a, end <= b, start < b, end > a. On integer
        # ns that is sm >= a and em <= b with a call of no length at x taken as [x - 1, x + 1];
        # a call starting after b ends after b, so the first such call from a on decides.
        o = np.flatnonzero(other & (ev.rt_thread == t))
        os_, oe = ev.rt_start[o], ev.rt_end[o]
        zero = oe == os_
        sm_row, em_row = np.where(zero, os_ - 1, os_), np.where(zero, oe + 1, oe)
        order = np.argsort(sm_row, kind="stable")
        sm, em = sm_row[order], em_row[order]
        rank = np.empty(o.size, np.int64)
        rank[order] = np.arange(o.size)
        pr = np.full(ri.size, -1, np.int64)  # the read's own call among them, -1 where not one
        if o.size:
            x = np.minimum(searchsorted(o, uniq[ri]), o.size - 1)
            pr = np.where(o[x] == uniq[ri], rank[x], -1)
        a, b, p = sa[j], sb[j], pr[i]
        start = searchsorted(sm, a, side="left")
        suf = np.append(np.minimum.accumulate(em[::-1])[::-1], _FAR)
        inside = p >= start  # the read's own call is among them: leave it out
        upto = np.where(inside, p, start)
        if em.size and bool(np.all(em[1:] >= em[:-1])):  # calls that do not nest: the first ends first
            before = np.where(upto > start, em[np.minimum(start, em.size - 1)], _FAR)
        else:
            before = _range_min(em, start, upto)
        nearest = np.minimum(np.where(inside, suf[p + 1], suf[start]), before)
        bad = nearest <= b
        # Per read, spans innermost first; its op is the last one before the first holding other work.
        o2 = np.lexsort((sp[j], -ev.span_depth[sp[j]], i))
        ii, jj, bd = i[o2], j[o2], bad[o2]
        g0 = np.flatnonzero(np.concatenate([[True], ii[1:] != ii[:-1]]))
        cum = np.cumsum(bd)
        grp = np.repeat(np.arange(g0.size), np.diff(np.append(g0, ii.size)))
        good = (cum - (cum - bd)[g0][grp]) == 0
        ngood = np.add.reduceat(good.astype(np.int64), g0)
        ok = ngood > 0
        best = jj[(g0 + ngood - 1)[ok]]
        u = ri[ii[g0[ok]]]
        has[u], a_out[u], b_out[u] = True, sa[best], sb[best]
    return has[inv], a_out[inv], b_out[inv]


def _read_own_ns(si: StepsInput, no_compute: Intervals, pairs: np.ndarray, steps: np.ndarray, calls: np.ndarray,
                 wrow: np.ndarray, wpair: np.ndarray, op) -> np.ndarray:
    """Per read pair: the compute-free time in its own call windows (its issuing call and the
    syncs that waited for it) and its op span, each read on its own lane (diagnose/lanes.py)."""
    out = np.zeros(pairs.size, np.int64)
    order = np.argsort(steps, kind="stable")
    lane_of = np.full(int(max(pairs.max(initial=-1), wpair.max(initial=-1))) + 1, -1, np.int64)
    for sl, lanes in Lanes.chunks(si.frame, steps[order]):
        mine = order[sl]
        lane_of[:] = -1
        lane_of[pairs[mine]] = np.arange(mine.size)
        wl = lane_of[wpair]
        w = wl >= 0
        rows = np.concatenate([calls[mine], wrow[w]])
        lane = np.concatenate([np.arange(mine.size), wl[w]])
        _, windows = base_steps.lane_call_windows(si, lanes, rows, lane, refill=True)
        has = op[0][mine]
        ops = lanes.place(op[1][mine][has], op[2][mine][has], np.flatnonzero(has))
        out[mine] = lanes.per_lane(measures.intersect(lanes.lift(no_compute), measures.union_many(windows, ops)))
    return out


def _codes(x: np.ndarray) -> np.ndarray:
    """Small integer codes of the distinct values (strings through Arrow's hash, no Python loop)."""
    if x.dtype == object:
        return np.asarray(pa_compute.dictionary_encode(pa.array(x, pa.string())).indices, np.int64)
    return np.asarray(x, np.int64)


def _by_kind(c, pc: np.ndarray, pk: np.ndarray, sel: np.ndarray, blocking: np.ndarray, crit: np.ndarray,
             guess: np.ndarray) -> dict:
    """step -> {kind: critical ns} over the selected pairs, kinds in the order the step's copies
    first show them (the per-step by_kind's order)."""
    idx = np.flatnonzero(sel)
    idx = idx[np.lexsort((pc[idx], pk[idx]))]
    rows = pc[idx]
    # What kind_of reads, as one integer per pair: it is called once per distinct combination.
    combo = np.zeros(idx.size, np.int64)
    for x in (c.kind[rows], c.src_kind[rows], c.dst_kind[rows], c.is_async[rows] + 1, blocking[idx], guess[idx]):
        code = _codes(x)
        combo = combo * (int(code.max(initial=0)) + 1) + code
    _, first, inv = np.unique(combo, return_index=True, return_inverse=True)
    names = [kind_of(str(c.kind[rows[f]]), *_kinds(c, int(rows[f]), bool(guess[idx[f]])), int(c.is_async[rows[f]]),
                     bool(blocking[idx[f]])) for f in first.tolist()]  # distinct kinds of copy: a handful
    code = np.array([list(FIXES).index(n) for n in names], np.int64)[inv.ravel()]
    nk = len(FIXES)
    key = pk[idx] * nk + code
    ukey, kfirst, kinv = np.unique(key, return_index=True, return_inverse=True)
    tot = np.zeros(ukey.size, np.int64)
    np.add.at(tot, kinv.ravel(), crit[idx])
    o = np.lexsort((kfirst, ukey // nk))
    out: dict[int, dict] = {}
    names = np.array(list(FIXES), object)[ukey[o] % nk].tolist()
    for k, kind, ns in zip((ukey[o] // nk).tolist(), names, tot[o].tolist()):  # the dicts next_experiments reads
        d = out.get(k)
        if d is None:
            out[k] = {kind: ns}
        else:
            d[kind] = ns
    return out
