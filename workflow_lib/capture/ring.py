"""Preallocated, fixed-size ring buffers: old events are overwritten, storage never grows.

A ring holds parallel typed columns (`array.array`, int64 `q` or float64 `d`) plus a
`seq` column; capacity is a power of two so a slot is `k & mask`. Writers take `k =
next(ring.ctr)` (atomic under the GIL), write their columns, and write `seq[slot] = k`
last: that is the commit mark. A reader peeks at the next index before copying and
after; only rows whose seq lies in `[after - capacity, before)` are complete and were not
being overwritten, so a reader never sees a torn row. Peeking reads the counter's repr
(`count(N)`), which takes no index, so readers leave no holes.

Hot-path writers (host spans) write the arrays directly and may keep references to the
arrays and to `ctr`, which therefore never change after construction; other sources use
`append` or the vectorized `extend`.

ctypes int64 arrays store an item ~7 ns faster than `array.array` in isolation, but inside
a span the difference was within run-to-run noise (benchmarks/span_cost.py, v3 vs v8), and
ctypes wraps an out-of-range int silently where `array.array` raises: array.array stays.
"""

from __future__ import annotations

import array
import itertools
import threading
from dataclasses import dataclass

import numpy as np

_DTYPES = {"q": np.int64, "d": np.float64}


def capacity_for(budget_bytes: int, row_bytes: int, minimum: int = 16) -> int:
    """Largest power of two of rows whose storage fits `budget_bytes` (at least `minimum`)."""
    rows = max(int(budget_bytes) // max(int(row_bytes), 1), minimum)
    return 1 << (rows.bit_length() - 1)


def peek(ctr) -> int:
    """The next index an `itertools.count` would give, read without taking it (its repr is
    "count(N)"): what the writers (a ring's, the step durations', C or Python) have taken."""
    return int(repr(ctr)[6:-1])


@dataclass(frozen=True)
class RingCopy:
    """Complete rows copied out of a ring, oldest first."""

    columns: dict[str, np.ndarray]
    written: int  # events ever written to the ring
    overwritten: int  # events lost to wrap-around (written - capacity, when positive)

    @property
    def rows(self) -> int:
        return len(self.columns["seq"])


class Ring:
    """Fixed-size ring of typed columns. `columns` maps name -> 'q' (int64) or 'd' (float64)."""

    def __init__(self, name: str, columns: dict[str, str], capacity: int):
        if capacity <= 0 or capacity & (capacity - 1):
            raise ValueError(f"ring {name}: capacity must be a power of two, got {capacity}")
        self.name = name
        self.capacity = capacity
        self.mask = capacity - 1
        self.ctr = itertools.count()
        self._lock = threading.Lock()  # readers and bulk writers only; never the hot path
        # array * n allocates once, zero-filled, with no temporary of the same size.
        self.cols = {c: array.array(t, [0]) * capacity for c, t in columns.items()}
        self.cols["seq"] = array.array("q", [0]) * capacity
        # seq starts at -capacity-1 so an unwritten slot never looks complete.
        np.frombuffer(self.cols["seq"], dtype=np.int64)[:] = -capacity - 1
        self.seq = self.cols["seq"]

    @property
    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in self.cols.values())

    @property
    def row_bytes(self) -> int:
        return sum(a.itemsize for a in self.cols.values())

    def _peek(self) -> int:
        return peek(self.ctr)

    @property
    def written(self) -> int:
        return self._peek()

    def append(self, *values) -> None:
        """One row, values in column order (without seq). For low-rate sources."""
        k = next(self.ctr)
        j = k & self.mask
        for arr, v in zip(self.cols.values(), values):
            arr[j] = v
        self.seq[j] = k

    def extend(self, **columns: np.ndarray) -> None:
        """Vectorized bulk insert (importers, tests). Not concurrent with `append` on the same ring."""
        n = len(next(iter(columns.values())))
        if n == 0:
            return
        with self._lock:
            # Take n consecutive indices in one C call (islice skips n-1, returns the n-th):
            # no other Python thread runs in between, and `ctr` stays the same object.
            start = next(itertools.islice(self.ctr, n - 1, None)) - (n - 1)
        keep = min(n, self.capacity)
        ks = np.arange(start + n - keep, start + n, dtype=np.int64)
        slots = ks & self.mask
        for name, arr in self.cols.items():
            view = np.frombuffer(arr, dtype=_DTYPES[arr.typecode])
            if name == "seq":
                continue
            view[slots] = np.asarray(columns[name])[n - keep:]
        np.frombuffer(self.seq, dtype=np.int64)[slots] = ks

    def copy(self) -> RingCopy:
        """Complete rows, oldest first (see the module doc for why this is torn-free)."""
        with self._lock:
            before = self._peek()
            raw = {c: np.frombuffer(a, dtype=_DTYPES[a.typecode]).copy() for c, a in self.cols.items()}
            after = self._peek()
        seq = raw["seq"]
        ok = (seq >= after - self.capacity) & (seq < before)
        order = np.argsort(seq[ok], kind="stable")
        cols = {c: v[ok][order] for c, v in raw.items()}
        written = before
        return RingCopy(columns=cols, written=written, overwritten=max(0, written - self.capacity))
