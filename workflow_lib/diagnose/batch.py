"""All steps of a rank at once: the interval algebra of the checks over sorted arrays.

A per-step check sees one step's window and clips the rank's evidence to it. Here a rank's
steps (disjoint, in time order) are one `StepFrame`, and a per-step interval set is a global
disjoint union *split at the step boundaries*: every piece lies inside one step, so the
per-step set of step k is exactly the pieces whose step is k. An operation on such sets
(measures.intersect / subtract / union) may merge two pieces that touch at a boundary;
`StepFrame.split` cuts them again. Per-step totals are prefix-sum lookups
(measures.covered_between), per-piece facts are one `searchsorted` to their step.

A check answers for all steps with `StepFindings`: a verdict per step, its claimed pieces
(inside the steps it attributed), and the missing evidence per step. `credit.Resolver` then does
what the per-step reference's resolution does step by step: in check order, each check is credited with the
part of its claim no earlier check took.

The diagnosis runs this way for every incident (columns.py). The per-step reference
(tests/reference_diagnosis: each check's `describe` step by step, resolved step by step) is
what tests/test_diagnose_batch.py holds it equal to on every fixture and random incident.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import measures
from .evidence import RankEvidence, RankInput
from .fast import searchsorted
from .types import FINDING_VERDICTS, Intervals

_I64 = np.int64
ATTRIBUTED, UNRESOLVED, NOT_APPLICABLE = (FINDING_VERDICTS.index(v) for v in ("attributed", "unresolved", "not_applicable"))


def _iv(s, e) -> Intervals:
    return Intervals(np.asarray(s, _I64), np.asarray(e, _I64))


@dataclass(frozen=True)
class StepFrame:
    """One rank's steps, disjoint and in time order (relative ns)."""

    ids: np.ndarray
    tids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    @property
    def n(self) -> int:
        return int(self.starts.size)

    @property
    def wall(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def windows(self) -> Intervals:
        return _iv(self.starts, self.ends)

    @staticmethod
    def disjoint(starts: np.ndarray, ends: np.ndarray) -> bool:
        """Whether steps in start order never overlap (what the frame needs)."""
        return bool(np.all(ends >= starts)) and bool(np.all(starts[1:] >= ends[:-1]))

    def split(self, iv: Intervals) -> tuple[Intervals, np.ndarray]:
        """The pieces of a disjoint union inside the steps, cut at step boundaries, and the
        step index of each piece (both in time order)."""
        if len(iv) == 0 or self.n == 0:
            return measures.empty(), np.zeros(0, _I64)
        k0 = searchsorted(self.ends, iv.start_ns, side="right")  # first step ending after the start
        k1 = searchsorted(self.starts, iv.end_ns, side="left")  # steps starting before the end
        cnt = np.maximum(k1 - k0, 0)
        if cnt.size and int(cnt.max()) <= 1:
            # Each interval inside one step at most (the usual case: pieces of a step's own
            # time): no repeats to spread it over several steps.
            which = np.flatnonzero(cnt)
            k = k0[which]
        else:
            total = int(cnt.sum())
            if total == 0:
                return measures.empty(), np.zeros(0, _I64)
            which = np.repeat(np.arange(cnt.size), cnt)
            first = np.cumsum(cnt) - cnt
            k = np.repeat(k0, cnt) + (np.arange(total) - np.repeat(first, cnt))
        s = np.maximum(iv.start_ns[which], self.starts[k])
        e = np.minimum(iv.end_ns[which], self.ends[k])
        keep = e > s
        return _iv(s[keep], e[keep]), k[keep]

    def pieces(self, iv: Intervals) -> Intervals:
        return self.split(iv)[0]

    def per_step(self, iv: Intervals) -> np.ndarray:
        """ns of a disjoint union inside each step."""
        return measures.covered_between(iv, self.starts, self.ends)

    def only(self, iv: Intervals, mask: np.ndarray) -> Intervals:
        """The pieces of `iv` inside the steps where `mask` holds."""
        p, k = self.split(iv)
        keep = mask[k]
        return _iv(p.start_ns[keep], p.end_ns[keep])

    def step_of(self, t: np.ndarray) -> np.ndarray:
        """Step index holding each time (start <= t < end), -1 outside every step."""
        k = searchsorted(self.starts, t, side="right") - 1
        kk = np.maximum(k, 0)
        return np.where((k >= 0) & (t < self.ends[kk]), k, -1)

    def overlapping(self, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(event index, step index) for every event [s, e) overlapping a step (start < step
        end and end > step start: IntervalIndex.overlapping's rule)."""
        k0 = searchsorted(self.ends, s, side="right")
        k1 = searchsorted(self.starts, e, side="left")
        cnt = np.maximum(k1 - k0, 0)
        total = int(cnt.sum())
        which = np.repeat(np.arange(cnt.size), cnt)
        first = np.cumsum(cnt) - cnt
        k = np.repeat(k0, cnt) + (np.arange(total) - np.repeat(first, cnt))
        return which, k

    def last_step_overlapped(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Per event: the index of the last step it overlaps (-1 when none)."""
        k0 = searchsorted(self.ends, s, side="right")
        k1 = searchsorted(self.starts, e, side="left")
        return np.where(k1 > k0, k1 - 1, -1)


@dataclass(frozen=True)
class StepsBase:
    """The steps' GPU timeline, computed once and shared by the checks (checks/base.StepBase
    for all steps)."""

    busy: Intervals  # pieces
    idle: Intervals  # pieces: each step's window less the busy time
    idle_step: np.ndarray  # step of each idle piece
    idle_long: Intervals  # idle pieces of at least options.min_gap_ns


def make_base(frame: StepFrame, ev: RankEvidence, min_gap_ns: int) -> StepsBase:
    busy = frame.pieces(ev.busy)
    idle, k = frame.split(measures.subtract(frame.windows, ev.busy))
    keep = (idle.end_ns - idle.start_ns) >= min_gap_ns
    return StepsBase(busy, idle, k, _iv(idle.start_ns[keep], idle.end_ns[keep]))


@dataclass(frozen=True)
class StepsInput:
    """What every batched check receives (checks/base.CheckInput for all steps)."""

    frame: StepFrame
    base: StepsBase
    rank: RankInput  # the evidence, sources and options (the options reach checks only through it)
    cold: list
    """Per step: the warm-up record of a cold first step ({position, typical_ns, basis}) or None."""
    lead_owed: np.ndarray | None = None
    """Per step: the lead the previous step's syncs left it short of (diagnose/lead.py); None: none owed."""

    @property
    def is_cold(self) -> np.ndarray:
        return np.array([c is not None for c in self.cold], bool)


@dataclass
class StepFindings:
    """One check's answer for every step of a rank."""

    check: str
    verdict: np.ndarray  # int8 per step: index into FINDING_VERDICTS
    claimed: Intervals  # pieces inside the attributed steps
    missing: list = field(default_factory=lambda: [()])  # distinct missing tuples; code 0 is ()
    missing_code: np.ndarray | None = None  # int32 per step into `missing`
    evidence: dict = field(default_factory=dict)  # step index -> evidence dict, where kept
    kinds_ns: dict = field(default_factory=dict)  # transfer_stall: step -> {copy kind: critical ns}
    spans_ns: dict = field(default_factory=dict)  # evidence "spans" ({name: ns}) summed over attributed steps
    first: Intervals | None = None  # pieces of `claimed` credited ahead of the other checks (types.Finding.first)

    def missing_of(self, k: int) -> tuple:
        return self.missing[int(self.missing_code[k])] if self.missing_code is not None else ()


def uniform(check: str, n: int, verdict: int, missing: tuple = ()) -> StepFindings:
    """The same verdict on every step, nothing claimed (a source absent for the whole rank)."""
    codes = np.full(n, 1 if missing else 0, np.int32)
    return StepFindings(check, np.full(n, verdict, np.int8), measures.empty(), [(), tuple(missing)], codes)


def answer(check: str, frame: StepFrame, attributed: np.ndarray, claimed: Intervals,
           otherwise: int = NOT_APPLICABLE) -> StepFindings:
    """attributed where the mask holds (claims kept only there), `otherwise` elsewhere."""
    verdict = np.where(attributed, ATTRIBUTED, otherwise).astype(np.int8)
    return StepFindings(check, verdict, frame.only(claimed, attributed), [()], np.zeros(frame.n, np.int32))


def top_names_summed(step: np.ndarray, names, rows: np.ndarray, weights: np.ndarray, limit: int = 5) -> dict[str, int]:
    """checks/base.top_names of each step's rows (event rows into the Names `names`, weighted),
    summed over the steps: what the per-step evidence "spans" add up to."""
    if rows.size == 0:
        return {}
    codes = names.codes[rows].astype(np.int64)
    text = names.dictionary.astype(str)
    srank = np.empty(text.size, np.int64)
    srank[np.argsort(text, kind="stable")] = np.arange(text.size)  # top_names breaks ties by name
    nc = np.int64(text.size)
    u, inv = np.unique(step.astype(np.int64) * nc + codes, return_inverse=True)
    tot = np.bincount(inv, weights=weights.astype(float))
    st, cd = u // nc, u % nc
    order = np.lexsort((srank[cd], -tot, st))
    first = searchsorted(st[order], st[order], side="left")
    top = order[(np.arange(order.size) - first) < limit]
    # Each kept (step, name) pair's total truncated as int() does, summed per name in int64; the
    # names in order of first appearance among the kept pairs (a Python loop over the pairs, one
    # or two a step, was 1.5 s of a 1M-step host-only diagnosis).
    c = cd[top]
    t = tot[top].astype(np.int64)
    names_u, first_at, inv = np.unique(c, return_index=True, return_inverse=True)
    summed = np.zeros(names_u.size, np.int64)
    np.add.at(summed, inv.reshape(-1), t)
    seq = np.argsort(first_at, kind="stable")
    return {str(text[x]): int(v) for x, v in zip(names_u[seq].tolist(), summed[seq].tolist())}
