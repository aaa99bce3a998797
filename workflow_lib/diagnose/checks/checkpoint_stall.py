"""checkpoint_stall: a checkpoint save stopped the step's thread.

Evidence required: host spans of vocabulary.CHECKPOINT_SPANS ("checkpoint.save" around
torch.save, "checkpoint.dcp_save" / "checkpoint.dcp_async_save" around
torch.distributed.checkpoint's saves: the zero-change capture's, capture/inprocess/torch_hooks.py),
on the step's own thread (a save on a thread of its own is already asynchronous), with the
bytes written (span_details). Kineto and Nsight traces hold no such span; where one holds
torch.save's shape instead (its storage copies: aten::set_ then aten::copy_ device->host, and
the host time after each with no op recorded: the write; save_shape.py), that is the save,
with `basis` saying it is inferred and `bytes` the storages copied.
Explains (checks/host_stall.py): the GPU idle inside the saves, or without GPU activity for
the step their own time ("basis: host-only"). Resolved before transfer_stall and sync_stall:
the state dict's device->host copies and their syncs inside a save are the save's, and their
fix is the save's, not that of a per-step .item().
The evidence splits a save into its copy time (device->host copies inside it) and the rest
(serialising and writing), which decide the fix.
"""

from __future__ import annotations

import numpy as np

from ...core.vocabulary import CHECKPOINT_SPANS
from .. import measures, save_shape
from ..batch import StepFindings, StepsInput
from ..types import Finding
from . import host_stall
from .base import CheckInput, not_applicable, unresolved

NAME = "checkpoint_stall"
ASYNC = ("save asynchronously: torch.distributed.checkpoint.async_save (or a background thread writing a snapshot), "
         "so the step waits only for the copy")
STAGE = "stage the state dict into a pinned host buffer allocated once and reused, copied with non_blocking=True"
RARER = "or save less often"


def fix_text(copy_ns: int, write_ns: int) -> str:
    """The change for where the save's time went: the write goes to the background; a long
    device->host copy needs a pinned staging buffer to be overlapped at all."""
    parts = [ASYNC]
    if copy_ns > 0:
        parts.append(STAGE)
    parts.append(RARER)
    return "; ".join(parts) if write_ns >= copy_ns else "; ".join([STAGE, ASYNC, RARER])


def describe(ci: CheckInput) -> Finding:
    if not ci.rank.src.spans:
        return unresolved(NAME, [host_stall.NO_SPANS])
    ev, step = ci.rank.ev, ci.step
    rows = host_stall.rows_in_step(ci, ev.span_is_checkpoint, own_thread=True)
    inf = _inferred_in_step(ci)
    if rows.size == 0 and inf.size == 0:
        return not_applicable(NAME, saves=0)
    si = ev.saves_inferred
    spans, claimed = host_stall.claim_one(ci, rows, (si.start[inf], si.end[inf]))
    nbytes, known = 0, 0
    names: dict[str, int] = {}
    if rows.size == 0:  # inferred from the storage copies: their bytes, and the saves' time
        nbytes, known = int(si.nbytes[inf].sum()), 1
        names[save_shape.LABEL] = int((si.end[inf] - si.start[inf]).sum())
    for r in rows.tolist():  # saves of one step: one or two
        name = str(ev.span_name[r])
        names[name] = names.get(name, 0) + int(ev.span_end[r] - ev.span_start[r])
        d = ev.details.of(name, int(ev.span_thread[r]), int(ev.span_start[r]))
        if d is not None and ev.details.nbytes[d] >= 0:
            nbytes += int(ev.details.nbytes[d])
            known += 1
    c = ev.copies
    crow = c.in_window(step.start_ns, step.end_ns)
    crow = crow[c.kind[crow] == "DtoH"]
    copy = measures.intersect(spans, measures.union(c.start[crow], c.end[crow])) if crow.size else measures.empty()
    copy_ns = copy.total_ns
    evidence = {
        **({"basis": host_stall.HOST_ONLY} if not ci.rank.src.kernels else {}),
        **({"inferred": save_shape.BASIS} if rows.size == 0 else {}),
        "saves": int(rows.size or inf.size), "save_ns": spans.total_ns, "gpu_idle_during_save_ns": claimed.total_ns,
        "bytes": nbytes if known else None, "copy_ns": copy_ns if ci.rank.src.kernels else None,
        "write_ns": spans.total_ns - copy_ns, "spans": names,
        "fix": fix_text(copy_ns, spans.total_ns - copy_ns),
    }
    if known and spans.total_ns:
        evidence["bytes_per_s"] = int(nbytes / (spans.total_ns / 1e9))
    return host_stall.verdict(NAME, ci, claimed, evidence, hidden="the save ran but the GPU stayed busy: it was hidden")


def _inferred_in_step(ci: CheckInput):
    """Rows of the rank's inferred saves (save_shape.py) overlapping the step, on its thread."""
    s = ci.rank.ev.saves_inferred
    hit = (s.start < ci.step.end_ns) & (s.end > ci.step.start_ns) & (s.thread == ci.step.thread_id)
    return np.flatnonzero(hit)


def check_steps(si: StepsInput) -> StepFindings:
    """describe() for every step of a rank at once (diagnose/batch.py)."""
    s = si.rank.ev.saves_inferred
    return host_stall.check_all(si, NAME, si.rank.ev.span_is_checkpoint, own_thread=True, extra=(s.start, s.end, s.thread))
