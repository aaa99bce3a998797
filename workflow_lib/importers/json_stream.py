"""Streaming reader for Chrome-trace JSON (`{"traceEvents": [...], ...}`), plain or gzip.

Memory stays a small multiple of one chunk, not of the file: the file is read in blocks, the
event array is cut into chunks at candidate element boundaries ("}" followed by "," or "]")
and each chunk is parsed by the C json parser as `[chunk]`. A wrong cut (a "}," inside a
string or a nested object) cannot parse as a complete array, because parsing from a true
element boundary is deterministic: the parse fails and an earlier boundary is tried. So the
cost is close to one `json.loads` of the file, without holding all of it at once.

Every malformed, truncated, hostile or too-deeply-nested input ends in one-line InputError.
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
from typing import Callable, Iterator

from ..errors import InputError

CHUNK_CHARS = 8 << 20          # parse the event array in ~8 MiB pieces
MAX_VALUE_CHARS = 256 << 20    # one event or one metadata value larger than this is refused
_READ_BYTES = 4 << 20
_WS = " \t\r\n"
_DEC = json.JSONDecoder()


class _Buffer:
    """A text window over a (possibly gzip) byte stream, refilled on demand."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise InputError(path, "trace file not found") from None
        except IsADirectoryError:
            raise InputError(path, "is a directory, expected a trace file") from None
        except PermissionError:
            raise InputError(path, "permission denied") from None
        magic = raw.read(2)
        raw.seek(0)
        self.fh = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        self.raw = raw
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False

    def close(self) -> None:
        self.fh.close()
        self.raw.close()

    def fill(self) -> bool:
        """Append one block; False at end of input."""
        if self.eof:
            return False
        try:
            block = self.fh.read(_READ_BYTES)
            text = self.decoder.decode(block, final=not block)
        except UnicodeDecodeError:
            raise InputError(self.path, "trace is not UTF-8 text") from None
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(self.path, f"cannot read trace ({str(exc).splitlines()[0][:200]})") from None
        if not block:
            self.eof = True
        # Drop consumed text so the window does not grow with the file.
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return bool(block)

    def skip_ws(self) -> str:
        """Skip whitespace; return the next character ('' at end of input)."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def expect(self, ch: str, what: str) -> None:
        got = self.skip_ws()
        if got != ch:
            raise InputError(self.path, f"malformed trace JSON: expected {what}, found {got or 'end of file'!r}")
        self.pos += 1

    def value(self):
        """Decode one complete JSON value at the cursor, refilling until it is complete."""
        self.skip_ws()
        while True:
            try:
                val, end = _DEC.raw_decode(self.buf, self.pos)
                self.pos = end
                return val
            except RecursionError:
                raise InputError(self.path, "trace JSON is nested too deeply") from None
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > MAX_VALUE_CHARS:
                    raise InputError(self.path, f"a trace value exceeds {MAX_VALUE_CHARS >> 20} MiB") from None
                if not self.fill():
                    raise InputError(self.path, f"malformed trace JSON ({exc.msg} near char {exc.pos})") from None


def _event_chunks(b: _Buffer) -> Iterator[list]:
    b.expect("[", "'[' opening traceEvents")
    if b.skip_ws() == "]":
        b.pos += 1
        return
    while True:
        while len(b.buf) - b.pos < CHUNK_CHARS and b.fill():
            pass
        parsed = _parse_prefix(b)
        if parsed is None:
            # No object boundary in the window (a huge event, or an element that is not an
            # object): decode exactly one value, refilling as needed.
            yield [b.value()]
        else:
            events, end = parsed
            b.pos = end
            yield events
        nxt = b.skip_ws()
        if nxt == "]":
            b.pos += 1
            return
        if nxt != ",":
            raise InputError(b.path, f"malformed traceEvents array: expected ',' or ']', found {nxt or 'end of file'!r}")
        b.pos += 1


def _parse_prefix(b: _Buffer) -> tuple[list, int] | None:
    """Parse the longest prefix of the window that ends at an element boundary."""
    buf, lo = b.buf, b.pos
    k = len(buf)
    failures = 0
    while failures < 16:  # a wrong candidate is rare in real traces; each costs one parse
        k = buf.rfind("}", lo, k)
        if k < 0:
            return None
        j = k + 1
        while j < len(buf) and buf[j] in _WS:
            j += 1
        if j >= len(buf) or buf[j] not in ",]":
            continue
        try:
            events = json.loads("[" + buf[lo:k + 1] + "]")
        except RecursionError:
            raise InputError(b.path, "trace JSON is nested too deeply") from None
        except json.JSONDecodeError:
            failures += 1
            continue
        return events, k + 1
    return None


def read_trace(path: str | os.PathLike, on_events: Callable[[list], None]) -> dict:
    """Stream a Chrome-trace file: call on_events(list_of_event_dicts) per chunk, return the
    other top-level keys (distributedInfo, baseTimeNanoseconds, deviceProperties, ...)."""
    b = _Buffer(path)
    meta: dict = {}
    seen_events = False
    try:
        b.expect("{", "a JSON object at the top level")
        if b.skip_ws() == "}":
            b.pos += 1
        else:
            while True:
                if b.skip_ws() != '"':
                    raise InputError(path, "malformed trace JSON: expected a key string")
                key = b.value()
                b.expect(":", "':' after a key")
                if key == "traceEvents":
                    seen_events = True
                    for chunk in _event_chunks(b):
                        on_events(chunk)
                else:
                    meta[key] = b.value()
                nxt = b.skip_ws()
                b.pos += 1
                if nxt == "}":
                    break
                if nxt != ",":
                    raise InputError(path, f"malformed trace JSON: expected ',' or '}}', found {nxt or 'end of file'!r}")
    finally:
        b.close()
    if not seen_events:
        raise InputError(path, "no 'traceEvents' array: not a Kineto/Chrome trace")
    return meta
