"""numpy.searchsorted for the diagnosis's time columns, by galloping when the C path is built.

The joins search time-ordered keys (step bounds, call starts, interval ends) in time-ordered
values; numpy's binary search does not use that order, the optional C path (_searchext.c,
built by setup.py like the capture's) does: the same answers, a merge's cost. Without it, or
for values or keys that are not int64, numpy.searchsorted answers.
"""

from __future__ import annotations

import numpy as np

try:
    from . import _searchext  # type: ignore[attr-defined]
except ImportError:  # optional: not built (no compiler), or another interpreter
    _searchext = None

_I64 = np.dtype(np.int64)
SMALL = 64  # keys; below it numpy's call overhead is the whole cost either way


def searchsorted(values: np.ndarray, keys, side: str = "left") -> np.ndarray:
    """numpy.searchsorted(values, keys, side) for sorted values (the same answers)."""
    if (_searchext is None or not isinstance(keys, np.ndarray) or not isinstance(values, np.ndarray)
            or keys.ndim != 1 or values.ndim != 1 or keys.size < SMALL or keys.dtype != _I64 or values.dtype != _I64):
        return np.searchsorted(values, keys, side=side)
    out = np.empty(keys.size, np.intp)
    _searchext.search(np.ascontiguousarray(values), np.ascontiguousarray(keys), out, side == "right")
    return out
