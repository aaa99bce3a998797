"""Kineto trace events -> Arrow columns, one chunk at a time.

Each chunk of event dicts becomes one typed StructArray in C++ (`pa.array(..., type=EVENT)`:
unknown keys are ignored, missing ones are null), filtered to the complete ('X') events of
the categories stallcase uses. Only a chunk whose values do not fit the types (a string pid
such as Kineto's "Spans" rows, a float byte count) goes through a Python clean-up pass.

Category spellings, current and older Kineto:
    kernel           kernel / Kernel
    gpu_memcpy       gpu_memcpy / Memcpy
    gpu_memset       gpu_memset / Memset
    cuda_runtime     cuda_runtime / Runtime, cuda_driver / Driver
    host spans       cpu_op / Operator, user_annotation, python_function
"""

from __future__ import annotations

import numbers

import pyarrow as pa
import pyarrow.compute as pc

_i64 = pa.int64()
ARGS = pa.struct([
    ("device", _i64), ("stream", _i64), ("correlation", _i64), ("bytes", _i64),
    ("grid", pa.list_(_i64)), ("block", pa.list_(_i64)),
])
EVENT = pa.struct([
    ("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()), ("pid", _i64), ("tid", _i64),
    ("ts", pa.float64()), ("dur", pa.float64()), ("args", ARGS),
])

KERNEL = ("kernel",)
MEMCPY = ("gpu_memcpy", "memcpy")
MEMSET = ("gpu_memset", "memset")
RUNTIME = ("cuda_runtime", "runtime", "cuda_driver", "driver")
HOST = ("cpu_op", "operator", "user_annotation", "python_function")
KEPT = KERNEL + MEMCPY + MEMSET + RUNTIME + HOST


def _int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**62:
        return int(v)
    return None


def _num(v):
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else None


def _str(v):
    return v if isinstance(v, str) else None


def _ints(v):
    return [x for x in map(_int, v) if x is not None] if isinstance(v, list) else None


def _clean(e) -> dict | None:
    if not isinstance(e, dict):
        return None
    a = e.get("args")
    args = None
    if isinstance(a, dict):
        args = {k: _int(a.get(k)) for k in ("device", "stream", "correlation", "bytes")}
        args.update(grid=_ints(a.get("grid")), block=_ints(a.get("block")))
    return {"ph": _str(e.get("ph")), "cat": _str(e.get("cat")), "name": _str(e.get("name")), "pid": _int(e.get("pid")),
            "tid": _int(e.get("tid")), "ts": _num(e.get("ts")), "dur": _num(e.get("dur")), "args": args}


def to_struct(events: list) -> pa.StructArray:
    """A chunk of event dicts -> the kept complete events as one StructArray."""
    try:
        arr = pa.array(events, type=EVENT)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
        # Off the fast path: values of unexpected types (string pids, float sizes, non-objects).
        arr = pa.array([_clean(e) for e in events], type=EVENT)
    if len(arr) == 0:
        return arr
    cat = pc.utf8_lower(arr.field("cat"))
    keep = pc.and_(pc.equal(arr.field("ph"), "X"), pc.is_in(cat, pa.array(KEPT)))
    keep = pc.and_(keep, pc.and_(pc.is_valid(arr.field("ts")), pc.is_valid(arr.field("name"))))
    return arr.filter(pc.fill_null(keep, False))
