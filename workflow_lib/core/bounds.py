"""Checks at the boundary: numbers, text, ids and versions that come from untrusted input.

One definition per rule, used by the importers, the manifest and table readers and the
sidecar, so "a rank" or "a time" means the same range everywhere. Every check raises an
InputError naming the file (`where`) and the field, or returns the checked value.
The caps below are what one input may expand to; docs/security.md lists them.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from .errors import InputError

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1

# ---- caps: what one input may expand to (docs/security.md, "Bounded resources")
# Rows of one table read from Parquet (a kernels table of a long H200 capture is ~5M rows).
MAX_TABLE_ROWS = 10_000_000
# Rows x columns of one table, checked from the Parquet footer before any page is read:
# an RLE page expands 30M rows from a few KB, so the file size says nothing.
MAX_TABLE_CELLS = 130_000_000
# Bytes of one table once decompressed (footer's uncompressed sizes), and of all the
# tables of one incident together: reading and checking takes about twice this.
MAX_TABLE_BYTES = 768 << 20
MAX_INCIDENT_TABLE_BYTES = 768 << 20
# Kept events of one Kineto trace (what becomes table rows).
MAX_TRACE_EVENTS = 4_000_000
# Bytes read from one (possibly gzip) trace after decompression (a gzip bomb of 1 GB of
# events in 3.6 MB is refused here, or by MAX_TRACE_EVENTS, whichever comes first).
MAX_TRACE_BYTES = 4 << 30
# A file the store copies or hashes (sources, inputs, patches, tables).
MAX_ARTIFACT_BYTES = 16 << 30
# Values in one configuration once YAML aliases are expanded (a config is a few hundred).
MAX_CONFIG_NODES = 100_000

_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
MAX_ID_LEN = 128
_ASCII_DIGITS = re.compile(r"\A[0-9]{1,19}\Z")


def show(v: Any) -> str:
    """repr of a value for an error line, short even for a 400-digit number."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**30:
        return f"a {len(str(abs(v)))}-digit integer"
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def integer(v: Any, field: str, where, *, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """An int (never a bool, never a float) within [lo, hi]."""
    if isinstance(v, bool):
        raise InputError(where, f"{field} is a boolean ({v}), not a number")
    if not isinstance(v, int):
        raise InputError(where, f"{field} is {show(v)}, expected an integer")
    if not lo <= v <= hi:
        raise InputError(where, f"{field} is {show(v)}, outside [{lo}, {hi}]")
    return v


def ns(v: Any, field: str, where) -> int:
    """A time or duration in int64 nanoseconds, not negative."""
    return integer(v, field, where, lo=0, hi=INT64_MAX)


def rank(v: Any, field: str, where) -> int:
    """A distributed rank: tables store it as int32."""
    return integer(v, field, where, lo=0, hi=INT32_MAX)


def seq(v: Any, field: str, where) -> int:
    """A sequence number or record id (int64 column, not negative)."""
    return integer(v, field, where, lo=0, hi=INT64_MAX)


def real(v: Any, field: str, where, *, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite number (int or float, never a bool) within [lo, hi]."""
    if isinstance(v, bool):
        raise InputError(where, f"{field} is a boolean ({v}), not a number")
    if not isinstance(v, (int, float)):
        raise InputError(where, f"{field} is {show(v)}, expected a number")
    try:
        f = float(v)
    except OverflowError:
        raise InputError(where, f"{field} is {show(v)}, too large for a number") from None
    if not math.isfinite(f) or not lo <= f <= hi:
        raise InputError(where, f"{field} is {show(v)}, outside [{lo}, {hi}]")
    return f


def decimal_id(s: str, field: str, where) -> int:
    """A step id or similar spelled in ASCII decimal digits ('²' and other Unicode digits are refused)."""
    if not isinstance(s, str) or not _ASCII_DIGITS.match(s) or int(s) > INT64_MAX:
        raise InputError(where, f"{field} {show(s)} is not a decimal integer in [0, {INT64_MAX}]")
    return int(s)


def duration_ns_from(text: str, scale: int, field: str, where) -> int:
    """A printed duration (e.g. '12.5' ms) in ns; a 400-digit or non-finite value is refused."""
    try:
        f = float(text) * scale
    except (TypeError, ValueError, OverflowError):
        raise InputError(where, f"{field} {show(text)} is not a number") from None
    if not math.isfinite(f) or not 0 <= f <= INT64_MAX:
        raise InputError(where, f"{field} {show(text)} is not a duration in [0, {INT64_MAX}] ns")
    return int(f)


def text(v: Any, field: str, where, *, max_len: int | None = None, nul: bool = False) -> str:
    """A str that encodes to UTF-8 (no lone surrogate), without NUL unless allowed."""
    if not isinstance(v, str):
        raise InputError(where, f"{field} is {show(v)}, expected text")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(where, f"{field} holds a lone surrogate {v[exc.start:exc.end]!r}: not valid Unicode text") from None
    if not nul and "\x00" in v:
        raise InputError(where, f"{field} holds a NUL character")
    if max_len is not None and len(v) > max_len:
        raise InputError(where, f"{field} is {len(v)} characters long, over the limit of {max_len}")
    return v


def identifier(v: Any, field: str, where) -> str:
    """Ids become directory names: \\A[A-Za-z0-9][A-Za-z0-9._-]*\\Z, at most 128, no '..'."""
    if not isinstance(v, str) or len(v) > MAX_ID_LEN or not _ID.match(v) or ".." in v:
        raise InputError(where, f"invalid {field} {show(v)}: use letters, digits, '.', '_' and '-' "
                                f"(max {MAX_ID_LEN}), not starting with '.' or '-'")
    return v


def version(v: Any, field: str, where, newest: int) -> int:
    """A format version we can read: a future one names the newest this stallcase supports."""
    integer(v, field, where, lo=1)
    if v > newest:
        raise InputError(where, f"{field} {v} is newer than this stallcase reads (newest supported: {newest}); upgrade stallcase")
    return v


def window(start: Any, end: Any, field: str, where) -> tuple[int, int]:
    """A [start, end] ns interval: both int64 ns, end not before start (reversed is refused, not swapped)."""
    s, e = ns(start, f"{field}.start_ns", where), ns(end, f"{field}.end_ns", where)
    if e < s:
        raise InputError(where, f"{field} is reversed: end_ns {e} is before start_ns {s}")
    return s, e


def unique_files(paths, where: str = "files") -> list:
    """The same file given twice (by any spelling or link) is refused, naming both."""
    seen: dict[tuple[int, int], Any] = {}
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue  # the reader reports a missing file with its own message
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise InputError(p, f"the same file is given twice (also as {seen[key]}): one input per rank")
        seen[key] = p
    return list(paths)


def json_numbers(obj: Any, where, path: str = "") -> None:
    """Every integer in a parsed JSON value fits int64; every float is finite (iterative walk)."""
    stack = [(obj, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, int):
            if not INT64_MIN <= v <= INT64_MAX:
                raise InputError(where, f"{p or '(root)'} is {show(v)}, outside the int64 range")
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InputError(where, f"{p or '(root)'} is not a finite number")
        elif isinstance(v, dict):
            stack.extend((x, f"{p}/{k}") for k, x in v.items())
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{p}/{i}") for i, x in enumerate(v))


def expanded_size(obj: Any, where, limit: int, what: str = "value") -> int:
    """Values in `obj` counting a shared container each time it is reached (YAML aliases,
    pickle memo): refuse past `limit` without ever walking the expansion itself."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(obj, False)]
    on_path: set[int] = set()
    while stack:
        v, done = stack.pop()
        if not isinstance(v, (dict, list, tuple)):
            continue
        key = id(v)
        kids = list(v.values()) if isinstance(v, dict) else list(v)
        if not done:
            if key in sizes:
                continue
            if key in on_path:
                raise InputError(where, f"{what} refers to itself (a recursive alias)")
            on_path.add(key)
            stack.append((v, True))
            stack.extend((k, False) for k in kids)
            continue
        on_path.discard(key)
        n = 1 + sum(sizes.get(id(k), 1) for k in kids)
        if n > limit:
            raise InputError(where, f"{what} expands to more than {limit} values (nested aliases?)")
        sizes[key] = n
    return sizes.get(id(obj), 1)


_JSON_BOOL_NUMBER = re.compile(rb'"(ts|dur|pid|tid|baseTimeNanoseconds|rank|device|stream|correlation|bytes)"\s*:\s*(true|false)\b')


def json_bool_numbers(piece: bytes, where) -> None:
    """Refuse raw JSON where a numeric event field is `true`/`false` (Arrow and pyarrow's
    converters would read `"ts": true` as 1: a fabricated timestamp)."""
    if b"true" not in piece and b"false" not in piece:  # a substring scan, ~20x faster than the regex
        return
    m = _JSON_BOOL_NUMBER.search(piece)
    if m:
        raise InputError(where, f"an event's '{m.group(1).decode()}' is {m.group(2).decode()}: a boolean, not a number")


def no_negative(values, field: str, where, what: str = "event") -> None:
    """Refuse (never clamp) negative values in a numpy array of durations or times."""
    import numpy as np

    n = int(np.count_nonzero(np.asarray(values) < 0))
    if n:
        raise InputError(where, f"{n} {what}(s) with a negative {field}: refused, not clamped to 0")
