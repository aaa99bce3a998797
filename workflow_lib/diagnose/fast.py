"""The diagnosis's optional C paths (_fastext.c, built by setup.py like the capture's), each
beside the numpy or Python path that gives the same answers where it is not built.

- searchsorted: the joins search time-ordered keys (step bounds, call starts, interval ends) in
  time-ordered values; numpy's binary search does not use that order, the C path gallops from
  the last answer: a merge's cost. Values or keys that are not int64 go to numpy.
- gaps_json: the steps table's longest-gaps texts, one per step, as an Arrow string column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

try:
    from . import _fastext  # type: ignore[attr-defined]
except ImportError:  # optional: not built (no compiler), or another interpreter
    _fastext = None

_I64 = np.dtype(np.int64)
SMALL = 64  # keys; below it numpy's call overhead is the whole cost either way


def searchsorted(values: np.ndarray, keys, side: str = "left") -> np.ndarray:
    """numpy.searchsorted(values, keys, side) for sorted values (the same answers)."""
    if (_fastext is None or not isinstance(keys, np.ndarray) or not isinstance(values, np.ndarray)
            or keys.ndim != 1 or values.ndim != 1 or keys.size < SMALL or keys.dtype != _I64 or values.dtype != _I64):
        return np.searchsorted(values, keys, side=side)
    out = np.empty(keys.size, np.intp)
    _fastext.search(np.ascontiguousarray(values), np.ascontiguousarray(keys), out, side == "right")
    return out


GAP_MAX_BYTES = 96  # _fastext.c's bound on one gap's text (with its comma)


def gaps_json(start_ns: np.ndarray, end_ns: np.ndarray, length_ns: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Per step k (gaps offsets[k]..offsets[k+1], offsets from 0): the JSON list of its gaps,
    `[{"end_ns":E,"length_ns":L,"start_ns":S},...]`, keys sorted as step_tables.canonical writes."""
    n = int(offsets.size) - 1
    if _fastext is None:
        one = [f'{{"end_ns":{e},"length_ns":{g},"start_ns":{s}}}'
               for s, e, g in zip(start_ns.tolist(), end_ns.tolist(), length_ns.tolist())]
        off = offsets.tolist()
        return pa.array(["[" + ",".join(one[off[k]:off[k + 1]]) + "]" for k in range(n)], pa.string())
    out_off = np.empty(n + 1, np.int32)
    data = np.empty(2 * n + GAP_MAX_BYTES * int(start_ns.size), np.uint8)
    c = [np.ascontiguousarray(x, np.int64) for x in (start_ns, end_ns, length_ns, offsets)]
    used = _fastext.gaps_json(*c, out_off, data)
    return pa.StringArray.from_buffers(n, pa.py_buffer(out_off), pa.py_buffer(data[:used]))
