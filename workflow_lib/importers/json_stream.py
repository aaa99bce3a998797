"""Streaming reader for Chrome-trace JSON, plain or gzip: the object format
(`{"traceEvents": [...], ...}`) and the JSON-array format (`[event, event, ...]`, whose
closing `]` the Chrome trace-event spec makes optional).

Memory stays a small multiple of one chunk, not of the file: the file is read as bytes in
blocks, the event array is cut into pieces at candidate element boundaries ("}" followed by
"," or "]"), and each piece is handed to a `parse` function that must refuse (raise
PieceRefused) anything that is not a complete sequence of elements. A wrong cut (a "},"
inside a string or inside a nested object) leaves an unterminated string or object at the
end of the piece, which no JSON parser accepts; parsing from a true element boundary is
deterministic, so an accepted piece ends on a true boundary. The next earlier candidate is
tried after a refusal. The default `parse` is json.loads of `[piece]`.

Every malformed, truncated, hostile or too-deeply-nested input ends in one-line InputError.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from typing import Callable, TypeVar

from ..core import bounds, safe_io
from ..core.errors import InputError

# Cut the event array into ~2 MiB pieces (peak memory ~ a few pieces). The cut points decide
# the Arrow chunks, and those the Parquet pages, so the incident's bytes (its digests): 4 MiB
# pieces parsed 1M events in ~0.5 s less CPU, and changed the kernels table's bytes.
CHUNK_BYTES = 2 << 20
MAX_VALUE_BYTES = 256 << 20    # one event or one metadata value larger than this is refused
_READ_BYTES = 1 << 20
_NONWS = re.compile(rb"[^ \t\r\n]")
_DEC = json.JSONDecoder()
T = TypeVar("T")


class PieceRefused(Exception):
    """Raised by a piece parser: the bytes are not a complete sequence of array elements."""


def parse_json_piece(piece: bytes) -> list:
    """Default piece parser: the elements as Python objects."""
    try:
        return json.loads(b"[" + piece + b"]")
    except RecursionError:
        raise InputError(None, "trace JSON is nested too deeply") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise PieceRefused() from None


class _Buffer:
    """A byte window over a (possibly gzip) stream, refilled on demand."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        raw = safe_io.open_regular(path)  # a FIFO or a device is refused before it can block
        magic = raw.read(2)
        raw.seek(0)
        self.fh = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        self.raw = raw
        self.buf = b""
        self.pos = 0
        self.eof = False

    def close(self) -> None:
        self.fh.close()
        self.raw.close()

    def fill(self, at_least: int = _READ_BYTES) -> bool:
        """Append `at_least` bytes rounded up to whole _READ_BYTES blocks, in one read and one
        copy of the window (not one copy per block); False at end of input. The window ends
        where block-by-block reads would end it, so pieces are cut where they always were."""
        if self.eof:
            return False
        try:
            block = self.fh.read(-(-max(at_least, 1) // _READ_BYTES) * _READ_BYTES)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(self.path, f"cannot read trace ({str(exc).splitlines()[0][:200]})") from None
        if not block:
            self.eof = True
            return False
        self.total = getattr(self, "total", 0) + len(block)
        if self.total > bounds.MAX_TRACE_BYTES:  # a gzip bomb: refused at the cap, not at the OOM killer
            raise InputError(self.path, f"trace expands to more than {bounds.MAX_TRACE_BYTES >> 20} MiB once decompressed")
        # Drop consumed bytes so the window does not grow with the file.
        self.buf = self.buf[self.pos:] + block
        self.pos = 0
        return True

    def peek(self) -> bytes:
        """Skip whitespace; return the next byte (b'' at end of input)."""
        while True:
            m = _NONWS.search(self.buf, self.pos)
            if m:
                self.pos = m.start()
                return self.buf[self.pos:self.pos + 1]
            self.pos = len(self.buf)
            if not self.fill():
                return b""

    def expect(self, ch: bytes, what: str) -> None:
        got = self.peek()
        if got != ch:
            raise InputError(self.path, f"malformed trace JSON: expected {what}, found {got.decode('latin-1') or 'end of file'!r}")
        self.pos += 1

    def value(self):
        """Decode one complete JSON value at the cursor, refilling until it is complete."""
        self.peek()
        while True:
            text = self.buf[self.pos:].decode("utf-8", errors="replace")
            try:
                val, end = _DEC.raw_decode(text)
            except RecursionError:
                raise InputError(self.path, "trace JSON is nested too deeply") from None
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_VALUE_BYTES:
                    raise InputError(self.path, f"a trace value exceeds {MAX_VALUE_BYTES >> 20} MiB") from None
                if not self.fill():
                    raise InputError(self.path, f"truncated or malformed trace JSON ({exc.msg})") from None
                continue
            consumed = text[:end].encode("utf-8")
            if self.buf[self.pos:self.pos + len(consumed)] != consumed:
                raise InputError(self.path, "trace is not UTF-8 text")
            self.pos += len(consumed)
            return val


def _events(b: _Buffer, parse: Callable[[bytes], T], on_piece: Callable[[T], None], open_end: bool = False) -> None:
    b.expect(b"[", "'[' opening traceEvents")
    if b.peek() == b"]":
        b.pos += 1
        return
    while True:
        while (short := CHUNK_BYTES - (len(b.buf) - b.pos)) > 0 and b.fill(short):
            pass
        got = _parse_prefix(b, parse)
        if got is None:
            # No acceptable boundary in the window (a huge event, or an element that is not
            # an object): decode exactly one value, refilling as needed.
            on_piece(parse(json.dumps(b.value()).encode("utf-8")))
        else:
            on_piece(got)
        nxt = b.peek()
        if nxt == b"]" or (open_end and nxt == b""):
            b.pos += 1
            return
        if open_end and nxt == b"," and _at_end(b):
            return
        if nxt != b",":
            raise InputError(b.path, f"malformed traceEvents array: expected ',' or ']', found {nxt.decode('latin-1') or 'end of file'!r}")
        b.pos += 1


def _at_end(b: _Buffer) -> bool:
    """A trailing ',' then end of input (allowed in the array format without its ']')."""
    b.pos += 1
    if b.peek() == b"":
        return True
    b.pos -= 1
    return False


def _parse_prefix(b: _Buffer, parse: Callable[[bytes], T]):
    """Parse the longest prefix of the window that ends at an element boundary; None if none."""
    buf, lo = b.buf, b.pos
    k = len(buf)
    refusals = 0
    while refusals < 16:  # a wrong candidate is rare in real traces; each costs one parse
        k = buf.rfind(b"}", lo, k)
        if k < 0:
            return None
        m = _NONWS.search(buf, k + 1)
        if m is None or buf[m.start()] not in b",]":
            continue
        try:
            got = parse(buf[lo:k + 1])
        except PieceRefused:
            refusals += 1
            continue
        except InputError as exc:
            raise InputError(b.path, exc.problem) from None
        b.pos = k + 1
        return got
    return None


def read_trace(path: str | os.PathLike, on_piece: Callable[[T], None], parse: Callable[[bytes], T] = parse_json_piece) -> dict:
    """Stream a Chrome-trace file: on_piece(parse(bytes of consecutive events)) per piece; return
    the other top-level keys (distributedInfo, baseTimeNanoseconds, deviceProperties, ...)."""
    b = _Buffer(path)
    meta: dict = {}
    seen_events = False
    try:
        if b.peek() == b"[":
            # JSON-array format: the whole file is the event array; no metadata.
            _events(b, parse, on_piece, open_end=True)
            if b.peek() != b"":
                raise InputError(path, "malformed trace JSON: data after the event array")
            return meta
        b.expect(b"{", "a JSON object (or an event array) at the top level")
        if b.peek() == b"}":
            b.pos += 1
        else:
            while True:
                if b.peek() != b'"':
                    raise InputError(path, "malformed trace JSON: expected a key string")
                key = b.value()
                b.expect(b":", "':' after a key")
                if key in meta or (key == "traceEvents" and seen_events):  # json.loads would keep the last
                    raise InputError(path, f"the key {key!r} appears twice at the top level")
                if key == "traceEvents":
                    seen_events = True
                    _events(b, parse, on_piece)
                else:
                    meta[key] = b.value()
                nxt = b.peek()
                b.pos += 1
                if nxt == b"}":
                    break
                if nxt != b",":
                    raise InputError(path, f"malformed trace JSON: expected ',' or '}}', found {nxt.decode('latin-1') or 'end of file'!r}")
        if b.peek() != b"":
            raise InputError(path, f"text after the JSON object at byte {b.pos}: not one trace")
    except InputError as exc:
        if exc.where is None:  # raised by a piece parser, which does not know the file
            raise InputError(path, exc.problem) from None
        raise
    finally:
        b.close()
    if not seen_events:
        raise InputError(path, "no 'traceEvents' array: not a Kineto/Chrome trace")
    return meta
