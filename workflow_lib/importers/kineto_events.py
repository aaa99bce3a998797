"""Kineto trace events -> Arrow columns, one chunk at a time.

Fast path: a piece of the event array (bytes) is rewritten to newline-delimited JSON (raw
newlines can only be whitespace in JSON, so they become spaces; "}, {" between events becomes
"}\n{") and parsed by Arrow's multithreaded JSON reader against an explicit schema (unknown
keys ignored). String-valued pid/tid (Kineto's "Spans" rows) are renamed out of the way when
Arrow refuses a piece that holds one.
If Arrow refuses the piece (a "}, {" that was not between events, an odd value type), the
piece is parsed by json.loads and converted with `pa.array(..., type=EVENT)`; only the few
events whose values do not fit the types go through a Python clean-up. Either way the result
is every event of the piece with the table each kept one goes to (`Events`): complete ('X')
events of the categories stallcase uses, with a name and a timestamp. The importer filters
each column it needs by its table's mask: filtering the whole nested event struct first cost
more than the JSON parse's own conversion (issue 26's profile: 0.4 s of 1M events).

Category spellings, current and older Kineto:
    kernel           kernel / Kernel
    gpu_memcpy       gpu_memcpy / Memcpy
    gpu_memset       gpu_memset / Memset
    cuda_runtime     cuda_runtime / Runtime, cuda_driver / Driver (HIP calls under the same
                     categories on ROCm builds; hip_runtime / hip_api where a tool writes them)
    host spans       cpu_op / Operator, user_annotation, python_function
(the one list: workflow_lib/vocabulary.SOURCE_ALIASES). Other device kinds' categories
(e.g. MTIA's) are not read: the import marks GPU sources not observed, saying why.
"""

from __future__ import annotations

import io
import json
import numbers
import re
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..core import bounds
from .json_stream import PieceRefused

_i64 = pa.int64()
ARGS = pa.struct([
    ("device", _i64), ("stream", _i64), ("correlation", _i64), ("bytes", _i64),
    ("grid", pa.list_(_i64)), ("block", pa.list_(_i64)),
])
EVENT = pa.struct([
    ("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()), ("pid", _i64), ("tid", _i64),
    ("ts", pa.float64()), ("dur", pa.float64()), ("args", ARGS),
])

from ..core.vocabulary import SOURCE_ALIASES

KERNEL = SOURCE_ALIASES["kernel"]
MEMCPY = SOURCE_ALIASES["memcpy"]
MEMSET = SOURCE_ALIASES["memset"]
RUNTIME = SOURCE_ALIASES["runtime_api"]
HOST = SOURCE_ALIASES["spans"]
KEPT = KERNEL + MEMCPY + MEMSET + RUNTIME + HOST

# The table a kept event goes to (0: not kept). Copies and memsets share one table, in the
# order of the trace.
KERNEL_T, COPY_T, RUNTIME_T, HOST_T = 1, 2, 3, 4
_TABLE_OF = {**{c: KERNEL_T for c in KERNEL}, **{c: COPY_T for c in MEMCPY + MEMSET},
             **{c: RUNTIME_T for c in RUNTIME}, **{c: HOST_T for c in HOST}}
if len(_TABLE_OF) != len(KEPT):
    raise RuntimeError("vocabulary.SOURCE_ALIASES names one category for two tables")


class Events(NamedTuple):
    """One piece's events, every one of them, and where each kept one goes."""
    arr: pa.StructArray   # EVENT-typed, in trace order
    table: np.ndarray     # int8 per event: KERNEL_T, COPY_T, RUNTIME_T, HOST_T, or 0 (not kept)
    is_set: np.ndarray    # bool per event: a memset (its table is COPY_T)

    @property
    def kept(self) -> int:
        return int(np.count_nonzero(self.table))

    def mask(self, table: int) -> pa.BooleanArray:
        return pa.array(self.table == table)


def _int(v, field="an integer field"):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return bounds.integer(v, f"an event's {field}", None)  # beyond int64: refused, not dropped to 0
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**62:
        return int(v)
    return None


def _num(v):
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else None


def _str(v, field="a text field"):
    return bounds.text(v, f"an event's {field}", None, nul=True) if isinstance(v, str) else None  # lone surrogates refused


def _ints(v):
    return [x for x in map(_int, v) if x is not None] if isinstance(v, list) else None


def _clean(e) -> dict | None:
    if not isinstance(e, dict):
        return None
    a = e.get("args")
    args = None
    if isinstance(a, dict):
        args = {k: _int(a.get(k), f"args.{k}") for k in ("device", "stream", "correlation", "bytes")}
        args.update(grid=_ints(a.get("grid")), block=_ints(a.get("block")))
    return {"ph": _str(e.get("ph"), "ph"), "cat": _str(e.get("cat"), "cat"), "name": _str(e.get("name"), "name"), "pid": _int(e.get("pid"), "pid"),
            "tid": _int(e.get("tid"), "tid"), "ts": _num(e.get("ts")), "dur": _num(e.get("dur")), "args": args}


_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError)
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
_STR_IDS = re.compile(rb'"(pid|tid)"(\s*:\s*)"')
_FIRST = re.compile(rb"\S")
_SCHEMA = pa.schema(list(EVENT))
_PARSE = pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")


def _convert(events: list) -> pa.StructArray:
    """Typed conversion; on a type error, split and clean only the offending events."""
    try:
        return pa.array(events, type=EVENT)
    except _CONVERT_ERRORS:
        if len(events) <= 64:
            return pa.array([_clean(e) for e in events], type=EVENT)
        mid = len(events) // 2
        return pa.concat_arrays([_convert(events[:mid]), _convert(events[mid:])])


_MARK_TO_LINES = bytes.maketrans(b"\x00\n\r", b"\n  ")


def _to_lines(piece: bytes, exact: bool = True) -> bytes:
    """One event per line. Kineto separates events with "},\n  {"; that exact separator is
    marked with bytes.replace (a raw NUL cannot occur in valid JSON) before newlines become
    spaces, which takes a tenth of the time of the regex that finds any "}, {" spacing. A piece
    laid out otherwise is then one line with several events, which Arrow refuses, and the
    caller retries with exact=False."""
    if exact and b"\x00" not in piece:
        return piece.replace(b"},\n  {", b"}\x00{").translate(_MARK_TO_LINES)  # one pass: NUL -> newline, newlines -> spaces
    return _BETWEEN.sub(b"}\n{", piece.replace(b"\n", b" ").replace(b"\r", b" "))


def parse_piece(piece: bytes) -> Events:
    """Bytes of consecutive events -> the events, classified (raises PieceRefused if not complete)."""
    try:
        try:
            arr = _read_lines(_to_lines(piece))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            arr = _read_lines(_to_lines(piece, exact=False))  # events not laid out as Kineto writes them
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        # Arrow reads against EVENT and refuses `"ts": true` in any field it reads (tests/
        # test_kineto_lines.py holds it to that); pyarrow's converter would read it as 1, a
        # fabricated timestamp, so this path looks for booleans in numeric fields first.
        bounds.json_bool_numbers(piece, None)  # the caller names the file
        try:
            events = json.loads(b"[" + piece + b"]")
        except RecursionError:
            from ..core.errors import InputError
            raise InputError(None, "trace JSON is nested too deeply") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise PieceRefused() from None
        arr = _convert(events)
    return classify(arr)


def _read_lines(text: bytes) -> pa.StructArray:
    """Arrow's JSON reader over one event per line; Arrow errors propagate to the caller's fallbacks."""
    first = _FIRST.search(text)  # not text.lstrip(): that copies the whole piece
    if first is None or first.group() != b"{":
        # pyarrow 26's JSON reader crashes the process (SIGSEGV) when the first row is
        # `null`; events are objects, so anything else takes the json.loads path.
        raise pa.ArrowInvalid("first element is not an object")
    try:
        table = _arrow_json(text)
    except pa.ArrowInvalid:
        # String pid/tid (Kineto's "Spans" rows) are rare: renamed out of the way only when
        # Arrow refused the piece and the piece holds one (a scan of every piece cost 0.1 s per 1M events).
        renamed = _STR_IDS.sub(rb'"\1_str"\2"', text)
        if renamed == text:
            raise
        table = _arrow_json(renamed)
    arr = pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in EVENT], fields=list(EVENT))
    _check_utf8(arr)
    return arr


def _check_utf8(arr: pa.StructArray) -> None:
    # Arrow's JSON reader keeps invalid UTF-8 bytes in string columns as they are; the
    # json.loads path refuses them. Refuse here too, before they reach a table on disk.
    for name in ("ph", "cat", "name"):
        try:
            arr.field(name).validate(full=True)
        except pa.ArrowInvalid:
            from ..core.errors import InputError
            raise InputError(None, "trace is not UTF-8 text") from None


def _arrow_json(text: bytes) -> pa.Table:
    # The system allocator hands freed parse buffers back; mimalloc keeps them (higher peak RSS).
    return pj.read_json(io.BytesIO(text), read_options=pj.ReadOptions(block_size=1 << 20), parse_options=_PARSE,
                        memory_pool=pa.system_memory_pool())


def _per_event(enc: pa.DictionaryArray, per_value: list) -> np.ndarray:
    """per_value[i] for each element whose value is the i-th distinct one; the last entry of
    per_value for nulls."""
    return np.asarray(per_value)[pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy()]


def classify(arr: pa.StructArray) -> Events:
    """Each event's table: complete ('X') events of the categories stallcase uses (any case:
    Arrow's utf8_lower, of the few distinct categories), with a name and a timestamp."""
    if len(arr) == 0:
        return Events(arr, np.zeros(0, np.int8), np.zeros(0, bool))
    cats = pc.dictionary_encode(arr.field("cat"))
    lower = pc.utf8_lower(cats.dictionary).to_pylist()
    ph = pc.dictionary_encode(arr.field("ph"))
    ok = _per_event(ph, [v == "X" for v in ph.dictionary.to_pylist()] + [False])
    ok &= arr.field("ts").is_valid().to_numpy(zero_copy_only=False)
    ok &= arr.field("name").is_valid().to_numpy(zero_copy_only=False)
    table = _per_event(cats, [_TABLE_OF.get(c, 0) for c in lower] + [0]).astype(np.int8)
    return Events(arr, np.where(ok, table, np.int8(0)), _per_event(cats, [c in MEMSET for c in lower] + [False]))
