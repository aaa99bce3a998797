"""collective_wait: time a rank spent in a collective waiting for slower peers.

Evidence required: the same step on every rank of the group, matched collective by
collective. Only the cross-rank collectives analysis can attribute this (diagnose/claims.py
reads its record, or matches the collectives' host spans across ranks, job.py): its finding
for a step is that step's answer here (`matched`), credited before every other check's claim.
Without a match the step is unresolved: with one rank because the peers are missing, with
several because the matching belongs to that analysis. NCCL kernel time in the step is
reported as evidence.

Where the matched wait sits on the step's timeline (`claim`): on the collective's host span
when it was matched from spans; else on the first `wait_ns` of the step's NCCL kernel time (a
peer's late arrival keeps this rank's NCCL kernel spinning); without either it cannot be
placed, and is credited last, with time no other check took.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import measures
from ..batch import ATTRIBUTED, NOT_APPLICABLE, UNRESOLVED, StepFindings, StepsInput, uniform
from ..types import FINDING_VERDICTS, Finding, Intervals, StepWindow
from .base import CheckInput, not_applicable, unresolved

NAME = "collective_wait"
NOT_PLACED = "not placed: no NCCL kernels observed; credited only with time no other check explained"


def describe(ci: CheckInput) -> Finding:
    """One step's answer with its evidence, without a cross-rank match."""
    ev, step = ci.rank.ev, ci.step
    nccl = measures.clip(ev.nccl_union, step.start_ns, step.end_ns)
    if ci.rank.src.ranks <= 1:
        return unresolved(NAME, ["other ranks' traces: a collective wait is only attributable by comparing arrival across ranks"],
                          ranks=ci.rank.src.ranks, nccl_kernel_ns=nccl.total_ns)
    if nccl.total_ns == 0:
        return not_applicable(NAME, ranks=ci.rank.src.ranks, nccl_kernel_ns=0)
    return unresolved(NAME, ["cross-rank collective matching (the collectives analysis)"],
                      ranks=ci.rank.src.ranks, nccl_kernel_ns=nccl.total_ns)


def check_steps(si: StepsInput) -> StepFindings:
    """Every step of a rank at once, without a cross-rank match (diagnose/batch.py)."""
    n = si.frame.n
    if si.rank.src.ranks <= 1:
        return uniform(NAME, n, UNRESOLVED, ("other ranks' traces: a collective wait is only attributable by comparing arrival across ranks",))
    nccl = si.frame.per_step(si.rank.ev.nccl_union) > 0
    return StepFindings(NAME, np.where(nccl, UNRESOLVED, NOT_APPLICABLE).astype(np.int8), measures.empty(),
                        [(), ("cross-rank collective matching (the collectives analysis)",)], nccl.astype(np.int32))


def claim(f: dict, sw: StepWindow, ev) -> Finding:
    """The analysis' finding `f` for one step as a claim on the step's timeline, with its evidence."""
    if f["verdict"] != "attributed":
        return Finding(NAME, f["verdict"], measures.empty(), {"ops": f["evidence"]}, tuple(f["missing"]))
    wait = int(f["explains_ns"])
    evidence = {"wait_ns": wait, "ops": f["evidence"]}
    if f.get("placed"):  # matched from the collectives' host spans: the wait is on those spans
        lo, hi = (np.array(x, np.int64) for x in zip(*f["placed"]))
        evidence["placement"] = "the collective's host span, from this rank's arrival to the last rank's"
        evidence["waited_for_ranks"] = sorted({e["waited_for_rank"] for e in f["evidence"]})
        return Finding(NAME, "attributed", measures.union(lo, hi), evidence, ())
    nccl = measures.clip(ev.nccl_union, sw.start_ns, sw.end_ns)
    if nccl.total_ns == 0:
        evidence["placement"] = NOT_PLACED
        return Finding(NAME, "attributed", measures.empty(), evidence, ())
    lengths = nccl.end_ns - nccl.start_ns
    before = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    take = np.clip(wait - before, 0, lengths)
    keep = take > 0
    evidence["placement"] = "first wait_ns of the step's NCCL kernel time"
    return Finding(NAME, "attributed", Intervals(nccl.start_ns[keep], nccl.start_ns[keep] + take[keep]), evidence, ())


@dataclass(frozen=True)
class Matched:
    """The steps of a StepFrame that the collectives analysis matched, and their answer."""

    rows: np.ndarray  # frame rows matched
    verdict: np.ndarray  # int8 per matched row
    missing: list  # per matched row: its missing tuple
    claims: StepFindings  # the placed waits, pieces inside the matched steps (credited first)
    unplaced: np.ndarray  # frame rows of attributed waits with nowhere to sit
    unplaced_ns: np.ndarray  # their wait_ns

    def over(self, f: StepFindings) -> StepFindings:
        """check_steps' answer `f` with the matched rows' answers in place of its own."""
        verdict = f.verdict.copy()
        verdict[self.rows] = self.verdict
        missing = list(f.missing)
        codes = np.zeros(verdict.size, np.int32) if f.missing_code is None else f.missing_code.copy()
        for r, t in zip(self.rows.tolist(), self.missing):
            if t not in missing:
                missing.append(t)
            codes[r] = missing.index(t)
        return StepFindings(NAME, verdict, measures.empty(), missing, codes)


def matched(si: StepsInput, coll: dict | None) -> Matched | None:
    """The analysis' findings ((rank, step_id) -> finding) for the frame's steps, placed on
    their timeline (`claim`); None when it matched none of them."""
    if not coll:
        return None
    fr, rank = si.frame, si.rank.ev.rank
    rows = [k for k, i in enumerate(fr.ids.tolist()) if (rank, i) in coll]
    if not rows:
        return None
    verdict, missing, cs, ce, unplaced, unplaced_ns = [], [], [], [], [], []
    for k in rows:  # matched steps: the collectives of a job, one finding each
        f = coll[(rank, int(fr.ids[k]))]
        sw = StepWindow(int(fr.ids[k]), rank, int(fr.tids[k]), int(fr.starts[k]), int(fr.ends[k]))
        found = claim(f, sw, si.rank.ev)
        verdict.append(FINDING_VERDICTS.index(found.verdict))
        missing.append(tuple(found.missing))
        if found.verdict == "attributed":
            c = measures.clip(found.claimed, sw.start_ns, sw.end_ns)
            cs.append(c.start_ns)
            ce.append(c.end_ns)
            if found.evidence["placement"] == NOT_PLACED:  # claim() places every attributed wait or says why not
                unplaced.append(k)
                unplaced_ns.append(int(f["explains_ns"]))
    claimed = measures.union(np.concatenate(cs), np.concatenate(ce)) if cs else measures.empty()
    at = np.asarray(rows, np.int64)
    mask = np.zeros(fr.n, bool)
    mask[at] = np.asarray(verdict) == ATTRIBUTED
    return Matched(at, np.asarray(verdict, np.int8), missing, StepFindings(NAME, mask.astype(np.int8), fr.only(claimed, mask)),
                   np.asarray(unplaced, np.int64), np.asarray(unplaced_ns, np.int64))
