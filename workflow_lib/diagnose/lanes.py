"""Many interval sets inside steps at once, side by side on one virtual timeline.

diagnose/batch.py holds one set per step: the pieces of a global disjoint union, each inside
its step. Some rules need several sets inside one step (transfer_stall: the windows of each
read on its own, to measure the time that read alone explains). `Lanes` gives each set a
lane: lane g is the window of step `step[g]` moved to start at `base[g]`. Lanes never
overlap, so measures.union / subtract / intersect run on all lanes at once, and per-lane
totals are prefix-sum lookups (measures.covered_between). With one lane per step at the
step's own start (`of_steps`) the virtual timeline is the real one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import measures
from .batch import StepFrame
from .fast import searchsorted
from .types import Intervals

_I64 = np.int64
# Virtual times stay below this (int64 with room for sums of lengths); `packed` callers that
# would pass it take their lanes in chunks (`chunks`).
LIMIT = 2 ** 62


@dataclass(frozen=True)
class Lanes:
    frame: StepFrame
    step: np.ndarray  # step index of each lane, ascending
    base: np.ndarray  # virtual start of each lane, ascending

    @property
    def n(self) -> int:
        return int(self.step.size)

    @property
    def shift(self) -> np.ndarray:
        """Per lane: virtual time minus real time."""
        return self.base - self.frame.starts[self.step]

    @staticmethod
    def of_steps(frame: StepFrame, steps: np.ndarray) -> "Lanes":
        """One lane per step in `steps` (distinct, ascending), on the real timeline."""
        steps = np.asarray(steps, _I64)
        return Lanes(frame, steps, frame.starts[steps])

    @staticmethod
    def chunks(frame: StepFrame, steps: np.ndarray) -> list[tuple[slice, "Lanes"]]:
        """One lane per entry of `steps` (ascending, repeats allowed), packed one after the
        other: [(the entries it holds, Lanes)], as few as keep virtual times below LIMIT."""
        steps = np.asarray(steps, _I64)
        if steps.size == 0:
            return []
        width = int(frame.wall[steps].max()) + 1
        per = max(1, LIMIT // width - 1)
        out = []
        for i in range(0, steps.size, per):  # one pass unless steps are hours long
            part = steps[i:i + per]
            out.append((slice(i, i + part.size), Lanes(frame, part, np.arange(part.size, dtype=_I64) * width)))
        return out

    def lanes_of(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into `steps`, lane) for every lane of each given step."""
        first = searchsorted(self.step, steps, side="left")
        cnt = searchsorted(self.step, steps, side="right") - first
        which = np.repeat(np.arange(cnt.size), cnt)
        start = np.cumsum(cnt) - cnt
        lane = np.repeat(first, cnt) + (np.arange(which.size) - np.repeat(start, cnt))
        return which, lane

    def place(self, s: np.ndarray, e: np.ndarray, lane: np.ndarray) -> Intervals:
        """Real intervals [s, e), each clipped to its lane's step and moved into the lane."""
        k = self.step[lane]
        d = self.shift[lane]
        return measures.union(np.maximum(s, self.frame.starts[k]) + d, np.minimum(e, self.frame.ends[k]) + d)

    def lift(self, iv: Intervals) -> Intervals:
        """A global disjoint union, each step's part copied into every lane of that step."""
        p, k = self.frame.split(iv)
        which, lane = self.lanes_of(k)
        d = self.shift[lane]
        return measures.union(p.start_ns[which] + d, p.end_ns[which] + d)

    def per_lane(self, iv: Intervals) -> np.ndarray:
        """ns of a virtual disjoint union inside each lane."""
        return measures.covered_between(iv, self.base, self.base + self.frame.wall[self.step])
