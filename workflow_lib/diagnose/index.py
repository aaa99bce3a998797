"""Which intervals overlap a window, in O(log n + hits) instead of a mask over every row.

Rows are sorted by start. Most intervals are short: those are found with two binary
searches (start in [lo - longest_short, hi)). The few long ones (longer than `long_ns`,
e.g. a whole-run Python span) are kept apart and checked directly.
"""

from __future__ import annotations

import numpy as np

from .fast import searchsorted


class IntervalIndex:
    def __init__(self, start_ns: np.ndarray, end_ns: np.ndarray):
        """start_ns must be ascending (the caller sorts its rows once)."""
        self.start_ns, self.end_ns = start_ns, end_ns
        dur = end_ns - start_ns
        # 'Long' = beyond 4x the 99th percentile duration: a handful of rows by construction.
        self.long_ns = int(np.percentile(dur, 99) * 4) + 1 if dur.size else 1
        is_long = dur > self.long_ns
        self.long_idx = np.flatnonzero(is_long)
        self.short_idx = np.flatnonzero(~is_long)
        self.short_start = start_ns[self.short_idx]

    def overlapping(self, lo_ns: int, hi_ns: int) -> np.ndarray:
        """Ascending row indices of intervals with start < hi and end > lo."""
        i = int(searchsorted(self.short_start, lo_ns - self.long_ns, side="left"))
        j = int(searchsorted(self.short_start, hi_ns, side="left"))
        cand = self.short_idx[i:j]
        cand = cand[self.end_ns[cand] > lo_ns]
        if self.long_idx.size:
            lg = self.long_idx[(self.start_ns[self.long_idx] < hi_ns) & (self.end_ns[self.long_idx] > lo_ns)]
            if lg.size:
                cand = np.union1d(cand, lg)
        return cand

    def containing(self, t_ns: int) -> np.ndarray:
        return self.overlapping(t_ns, t_ns + 1)
