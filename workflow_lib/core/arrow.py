"""Arrow columns for the recorder's tables, built from buffers.

The recorder writes its snapshot inside the user's process. pyarrow's `pa.array` and
`pa.table` look for pandas on their first call and import it when installed: half a
second and tens of MB in the workload's process, at its first snapshot, for nothing the
recorder needs. These build the same columns from numpy buffers (`Array.from_buffers`),
which never asks for pandas; `tests/test_capture_no_pandas.py` holds the recorder to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32, pa.float64(): np.float64}


def _validity(mask) -> tuple[pa.Buffer | None, int]:
    """Arrow's validity bitmap (1 = present) for `mask` (True = null)."""
    if mask is None:
        return None, 0
    mask = np.asarray(mask, dtype=bool)
    nulls = int(mask.sum())
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(~mask, bitorder="little")), nulls


def numbers(values, typ: pa.DataType = pa.int64(), mask=None) -> pa.Array:
    """An int64, int32 or float64 column; `mask` True where the value is null."""
    data = np.ascontiguousarray(values, dtype=_NUMPY[typ])
    bitmap, nulls = _validity(mask)
    return pa.Array.from_buffers(typ, len(data), [bitmap, pa.py_buffer(data)], null_count=nulls)


def bools(values) -> pa.Array:
    data = np.asarray(values, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(np.packbits(data, bitorder="little"))])


def strings(values: Sequence[str | None]) -> pa.Array:
    """A string column from Python strings; None is null."""
    encoded = [b"" if v is None else str(v).encode("utf-8", "surrogatepass") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError(f"string column of {offsets[-1]} bytes is over Arrow's 2 GiB string limit")
    bitmap, nulls = _validity([v is None for v in values])
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))],
                                 null_count=nulls)


def strings_at(names: Sequence[str | None], index) -> pa.Array:
    """names[index] as a string column, with numpy's indexing (a negative index counts from
    the end: the sources use -1 for their last, "unknown", name): each name encoded once."""
    index = np.asarray(index, dtype=np.int64)
    index = np.where(index < 0, index + len(names), index)
    return strings(names).take(numbers(index, pa.int64()))


def table(columns: Mapping[str, pa.Array]) -> pa.Table:
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))


def values(column, null=-1) -> np.ndarray:
    """The numbers of an int or float column (Array or ChunkedArray) as numpy, nulls as `null`.

    `to_numpy()`, `fill_null()` and scalars ask for pandas too; this reads each chunk's
    data and validity buffers instead."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    typ = column.type
    if typ not in _NUMPY:
        raise TypeError(f"values() reads int64, int32 or float64 columns, not {typ}")
    parts = []
    for chunk in chunks:
        validity, data_buf = chunk.buffers()[:2]
        n, off = len(chunk), chunk.offset
        data = np.frombuffer(data_buf, dtype=_NUMPY[typ], count=n + off)[off:] if n else np.zeros(0, _NUMPY[typ])
        if chunk.null_count and validity is not None:
            bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[off:off + n]
            data = np.where(bits.astype(bool), data, null)
        parts.append(data)
    return np.concatenate(parts) if parts else np.zeros(0, _NUMPY[typ])


def count_negative(column) -> int:
    """Rows of a number column below zero (nulls are not)."""
    return int(np.count_nonzero(values(column, null=0) < 0))
