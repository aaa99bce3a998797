"""torch.save's shape in a capture that has no save span (Kineto, or any trace of aten ops).

torch.save writes a CUDA tensor's storage by copying it to host memory first
(`UntypedStorage.cpu()`: a new storage wrapped by `aten::set_`, then `aten::copy_`
device->host), then pickles and writes the bytes to the file, which records no op and no CUDA
call. A tensor's `.cpu()` / `.to("cpu")` is `aten::to` -> `aten::_to_copy` -> `aten::copy_`
on a tensor from `aten::empty_strided`, never right after `aten::set_`. So, per thread:

- a storage copy is an `aten::copy_` span holding the call of a device->host copy (by
  correlation id), whose thread's last span before it is an `aten::set_` ending at most
  SET_BEFORE_COPY_NS before it;
- its save time is the copy span and the host time after it up to the thread's next span or
  CUDA call (the write: nothing recorded there);
- storage copies whose pieces lie at most MERGE_NS apart are one save (torch.save copies one
  storage after the other, with a few ops between), kept when it moved at least MIN_BYTES.

checkpoint_stall reads these where no save span names the save (its evidence says
"inferred"); a capture with save spans (the zero-change recorder) does not need them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fast import searchsorted

SET_BEFORE_COPY_NS = 100_000
MERGE_NS = 1_000_000
MIN_BYTES = 1 << 20
BASIS = ("inferred: no save span in the capture; torch.save's storage copies (aten::set_ then aten::copy_ "
         "device->host) and the host time after each with no op recorded (the write)")
LABEL = "torch.save (inferred from storage copies)"
_I64 = np.int64


@dataclass(frozen=True)
class InferredSaves:
    """One row per inferred save of a rank (relative ns), sorted by start."""

    start: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    nbytes: np.ndarray
    copies: np.ndarray

    @staticmethod
    def empty() -> "InferredSaves":
        z = np.zeros(0, _I64)
        return InferredSaves(z, z, z, z, z)


def find(ev, d2h: np.ndarray, call: np.ndarray) -> InferredSaves:
    """The inferred saves of a rank's evidence (evidence.RankEvidence, being built), given its
    device->host copies `d2h` (rows of ev.copies) and the runtime call that issued each."""
    names = ev.span_name
    if ev.span_start.size == 0 or d2h.size == 0:
        return InferredSaves.empty()
    is_copy = names.where(lambda x: x == "aten::copy_")
    is_set = names.where(lambda x: x == "aten::set_")
    if not is_copy.any() or not is_set.any():
        return InferredSaves.empty()
    c = ev.copies
    pieces = []  # (start, end, thread, bytes, copies) per storage copy
    for tid in np.unique(ev.span_thread[is_copy]).tolist():  # threads are few
        mine = np.flatnonzero(ev.span_thread == tid)
        cp = mine[is_copy[mine]]  # by start (spans are sorted by start)
        here = ev.rt_thread[call] == tid
        if not here.any():
            continue
        cs, ce = ev.rt_start[call[here]], ev.rt_end[call[here]]
        j = searchsorted(ev.span_start[cp], cs, side="right") - 1
        inside = (j >= 0) & (ev.span_end[cp[np.maximum(j, 0)]] >= ce)
        held = np.zeros(cp.size, _I64)
        nbytes = np.zeros(cp.size, _I64)
        np.add.at(held, j[inside], 1)
        np.add.at(nbytes, j[inside], np.maximum(c.nbytes[d2h[here][inside]], 0))
        cp, nbytes, held = cp[held > 0], nbytes[held > 0], held[held > 0]
        if cp.size == 0:
            continue
        # The thread's last span ending before each copy: an aten::set_, close before it.
        by_end = mine[np.argsort(ev.span_end[mine], kind="stable")]
        k = searchsorted(ev.span_end[by_end], ev.span_start[cp], side="right") - 1
        prev = by_end[np.maximum(k, 0)]
        storage = (k >= 0) & is_set[prev] & (ev.span_start[cp] - ev.span_end[prev] <= SET_BEFORE_COPY_NS)
        cp, nbytes, held = cp[storage], nbytes[storage], held[storage]
        if cp.size == 0:
            continue
        # The write ends where the thread is seen again: its next span or CUDA call.
        starts = np.union1d(ev.span_starts_by_thread[int(tid)], ev.rt_start[ev.rt_thread == tid])
        n = searchsorted(starts, ev.span_end[cp], side="left")
        s = ev.span_start[cp]
        e = np.maximum(np.where(n < starts.size, starts[np.minimum(n, starts.size - 1)], ev.span_end[cp]), ev.span_end[cp])
        # One save: storage copies whose pieces lie at most MERGE_NS apart (in start order).
        run_end = np.maximum.accumulate(e)
        new = np.ones(s.size, bool)
        new[1:] = s[1:] - run_end[:-1] > MERGE_NS
        g = np.cumsum(new) - 1
        first = np.flatnonzero(new)
        out_e = np.zeros(first.size, _I64)
        np.maximum.at(out_e, g, e)
        pieces.append((s[first], out_e, np.full(first.size, tid, _I64),
                       np.bincount(g, weights=nbytes, minlength=first.size).astype(_I64),
                       np.bincount(g, weights=held, minlength=first.size).astype(_I64)))
    if not pieces:
        return InferredSaves.empty()
    s, e, t, b, h = (np.concatenate([p[i] for p in pieces]) for i in range(5))
    keep = b >= MIN_BYTES
    o = np.argsort(s[keep], kind="stable")
    return InferredSaves(s[keep][o], e[keep][o], t[keep][o], b[keep][o], h[keep][o])
