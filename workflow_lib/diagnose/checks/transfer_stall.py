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

from ...core.vocabulary import base_name
from .. import measures
from ..evidence import launch_rows
from ..types import Finding, Intervals
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


def _held_up_a_kernel(ci: CheckInput, rows: np.ndarray) -> np.ndarray:
    """Per copy: did the next kernel on its stream wait for it (launched before the copy ended,
    started at or after its end)? Without a launch to compare with, a kernel that starts
    within min_gap_ns of the copy's end counts as waiting."""
    ev, c = ci.ev, ci.ev.copies
    out = np.zeros(rows.size, bool)
    for k, r in enumerate(rows.tolist()):  # copies of one step: a handful
        j = int(np.searchsorted(ev.k_start, c.end[r], side="left"))
        same = np.flatnonzero(ev.k_stream[j:j + _LOOKAHEAD] == c.stream[r])
        if same.size == 0:
            continue
        nk = j + int(same[0])
        if ev.k_start[nk] >= ci.step.end_ns:
            continue
        row, ok = launch_rows(ev, ev.k_corr[nk:nk + 1])
        if ok[0]:
            out[k] = ev.rt_start[row[0]] < c.end[r]
        else:
            out[k] = ev.k_start[nk] - c.end[r] < ci.opts.min_gap_ns
    return out


# Kernels looked at after a copy's end for the next one on its stream (other streams' kernels
# interleave; a stream's next kernel is among the next few hundred on a busy GPU).
_LOOKAHEAD = 512


def _host_blocking(ev, crow: np.ndarray, matched: np.ndarray, c, rows: np.ndarray) -> np.ndarray:
    """Per copy: did the issuing call hold the host (synchronous call, or pageable staging)?"""
    out = np.zeros(rows.size, bool)
    for k in np.flatnonzero(matched):  # copies of one step: a handful
        name = base_name(str(ev.rt_name[crow[k]]))
        # cudaMemcpy / cudaMemset / hipMemcpyWithStream return when the copy is done; a copy
        # issued by another call (cudaGraphLaunch, a kernel) does not hold the host.
        sync_call = _COPY_CALL.search(name) is not None and "async" not in name.lower()
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


def check(ci: CheckInput) -> Finding:
    if not ci.src.kernels:
        return unresolved(NAME, ["GPU activity (kernels/memcpy not observed)"])
    ev, step = ci.ev, ci.step
    c = ev.copies
    rows = c.in_window(step.start_ns, step.end_ns)
    if rows.size == 0:
        return not_applicable(NAME, copies=0)
    lo, hi = step.start_ns, step.end_ns
    copy_iv = measures.clip(measures.union(c.start[rows], c.end[rows]), lo, hi)
    no_compute = measures.subtract(measures.as_intervals([lo], [hi]), measures.clip(ev.kernel_busy, lo, hi))
    delaying = _held_up_a_kernel(ci, rows)
    gpu_waited = measures.intersect(no_compute, measures.clip(measures.union(c.start[rows[delaying]], c.end[rows[delaying]]), lo, hi))
    crow, matched = launch_rows(ev, c.corr[rows]) if ci.src.runtime_api else (np.zeros(rows.size, np.int64), np.zeros(rows.size, bool))
    blocking = _host_blocking(ev, crow, matched, c, rows)
    waits = _waiting_syncs(ev, crow, matched, c, rows, hi) if ci.src.runtime_api else [np.zeros(0, np.int64)] * rows.size
    read = np.array([w.size > 0 for w in waits], bool)
    blocking |= read
    host_side = measures.empty()
    ops: dict[int, Intervals] = {}
    if blocking.any():
        calls = np.unique(np.concatenate([crow[blocking]] + [w for w in waits if w.size]))
        _, windows = call_windows(ci, calls)
        ops = _read_op_spans(ev, crow, read & matched)
        if ops:
            windows = measures.union_many(windows, measures.clip(measures.union_many(*ops.values()), lo, hi))
        host_side = measures.intersect(no_compute, windows)
    claimed = measures.union_many(gpu_waited, host_side)
    # Per copy: its own critical time (compute-free copy time + host-blocked idle in its call).
    by_kind: dict[str, dict] = {}
    best: dict[str, float] = {}
    for k, r in enumerate(rows.tolist()):  # copies of one step: a handful
        kind = kind_of(str(c.kind[r]), str(c.src_kind[r]), str(c.dst_kind[r]), int(c.is_async[r]), bool(blocking[k]))
        dur = int(c.end[r] - c.start[r])
        one = measures.clip(measures.as_intervals([c.start[r]], [c.end[r]]), lo, hi)
        crit = measures.intersect(gpu_waited, one).total_ns if delaying[k] else 0
        if read[k]:
            _, own = call_windows(ci, np.concatenate([[crow[k]], waits[k]]))
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
        b["copy_ns"] += dur
        b["critical_ns"] += int(crit)
        direction = str(c.kind[r])
        b["direction"][direction] = b["direction"].get(direction, 0) + 1
        if c.nbytes[r] > 0:
            b["bytes"] += int(c.nbytes[r])
            if dur > 0 and kind != "pageable":
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
    if claimed.total_ns < ci.opts.min_gap_ns:
        evidence["note"] = "copies ran beside kernels or the host: none on the critical path"
        return not_applicable(NAME, **evidence)
    return attributed(NAME, claimed, **evidence)
