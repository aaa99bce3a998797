"""Pretty JSON for records on disk, at the C encoder's speed for long arrays.

`json.dumps(indent=2)` runs Python's pure-Python encoder (the C one only serves
indent=None): for a diagnosis of 3,313 steps it took 2.5 s and 65 MiB of transient
strings, more than the diagnosis' own peak (issue 26). Here every container is laid out
exactly as `json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)` does, except
that an array of more than LONG_ARRAY elements holds one element per line, each element
encoded compactly by the C encoder. Small records come out byte for byte as before; long
ones stay readable line by line (one step, one op, one block per line). The digest of a
record is over its canonical bytes (records.canonical_bytes), so the layout never changes it.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

LONG_ARRAY = 64
_ONE_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
_SCALAR = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


# Elements of a long array encoded per piece: a writer streams pieces of this many elements,
# so a 1M-step record is never one string in memory (issue 26).
BATCH = 1024
_CANON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Encoded:
    """A long array (more than LONG_ARRAY elements) whose elements are already encoded, kept
    outside memory by whoever made it: `pretty()` yields each element as _ONE_LINE encodes it,
    `canonical()` as records.canonical_bytes does (both as str, one per element, in order).
    Laid out by chunks/canonical_chunks exactly as the list itself would be (issue 26: a
    diagnosis' steps go to disk rank by rank and are never a list of dicts)."""

    def __init__(self, n: int, pretty, canonical):
        if n <= LONG_ARRAY:
            raise ValueError(f"Encoded holds long arrays only (> {LONG_ARRAY} elements), not {n}")
        self.n, self.pretty, self.canonical = n, pretty, canonical


def dumps(value: Any) -> str:
    """`value` as pretty JSON text (no trailing newline)."""
    return "".join(_chunks(value, 0))


def chunks(value: Any) -> Iterator[str]:
    """dumps(value) in pieces (their concatenation is dumps(value)), for writing as they come."""
    return _chunks(value, 0)


def canonical_chunks(value: Any) -> Iterator[str]:
    """records.canonical_bytes(value) as text in pieces: the same characters as
    json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False), for hashing a
    record without holding its canonical text whole."""
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        yield "{"
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "") + _CANON.encode(key) + ":"
            yield from canonical_chunks(value[key])
        yield "}"
    elif isinstance(value, Encoded):
        yield "["
        for i, text in enumerate(value.canonical()):
            yield ("," if i else "") + text
        yield "]"
    elif isinstance(value, (list, tuple)) and len(value) > LONG_ARRAY:
        yield "["
        for lo in range(0, len(value), BATCH):
            yield ("," if lo else "") + ",".join(map(_CANON.encode, value[lo:lo + BATCH]))
        yield "]"
    else:
        yield _CANON.encode(value)


def _chunks(value: Any, level: int) -> Iterator[str]:
    if isinstance(value, dict):
        if not value:
            yield "{}"
            return
        inner = "\n" + "  " * (level + 1)
        yield "{"
        first = True
        for key in sorted(value):
            yield (inner if first else "," + inner) + _SCALAR.encode(_key(key)) + ": "
            first = False
            yield from _chunks(value[key], level + 1)
        yield "\n" + "  " * level + "}"
    elif isinstance(value, Encoded):
        inner = "\n" + "  " * (level + 1)
        yield "["
        for i, line in enumerate(value.pretty()):
            yield ("," if i else "") + inner + line
        yield "\n" + "  " * level + "]"
    elif isinstance(value, (list, tuple)):
        if not value:
            yield "[]"
            return
        inner = "\n" + "  " * (level + 1)
        yield "["
        if len(value) > LONG_ARRAY:
            for lo in range(0, len(value), BATCH):
                yield ("," if lo else "") + inner + ("," + inner).join(map(_ONE_LINE.encode, value[lo:lo + BATCH]))
        else:
            for i, item in enumerate(value):
                yield inner if i == 0 else "," + inner
                yield from _chunks(item, level + 1)
        yield "\n" + "  " * level + "]"
    else:
        yield _SCALAR.encode(value)


def _key(key: Any) -> str:
    # Non-string keys become strings as json.dumps makes them (records use str keys).
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    return _SCALAR.encode(key)
