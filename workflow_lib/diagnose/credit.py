"""Credit on the timeline: explains_ns never double counts.

Findings claim intervals of the step. Walking them in check priority order, each attributed
finding is credited only with the part of its claim not already credited to an earlier one,
so the credited amounts are disjoint, their sum is the union of all claims, and it cannot
exceed the step's wall time. The rest is reported as unexplained.
"""

from __future__ import annotations

import numpy as np

from . import measures
from .batch import StepFrame
from .types import Intervals

_I64 = np.int64


class Resolver:
    """The credit rule for all steps of a StepFrame, one finding at a time in check order: each is credited
    with the part of its claim no earlier finding took (its claim can be dropped after)."""

    def __init__(self, frame: StepFrame):
        self.frame = frame
        self.taken = measures.empty()

    def credit(self, claimed: Intervals) -> np.ndarray:
        """explains_ns per step of the next finding."""
        if len(claimed) == 0:
            return np.zeros(self.frame.n, _I64)
        own = measures.subtract(claimed, self.taken) if len(self.taken) else claimed
        self.taken = measures.union_many(self.taken, own)
        return self.frame.per_step(own)

    def explained(self) -> np.ndarray:
        return self.frame.per_step(self.taken)
