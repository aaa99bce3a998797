"""User patterns (step, wait, metric regexes) compiled on a linear-time engine.

A pattern is applied to text the workload or a trace controls, so a backtracking engine
can be made to run for minutes on one line (`^(a+)+$` on "aaaa...b"). google-re2
matches in time linear in the input and refuses what it cannot do linearly
(backreferences, lookaround). Without re2 installed, Python's `re` is used only for
patterns with no nested or adjacent unbounded repetition and no backreference: the
shapes that backtrack exponentially are refused with a one-line error. Every module that
compiles a user pattern calls `compile_pattern`; `\\d` means ASCII 0-9 on both engines.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import InputError

try:  # google-re2: the `re2` module
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised by tests that hide the module
    _re2 = None

# Bytes of compiled program re2 may use for one pattern (its default is 8 MiB).
RE2_MAX_MEM = 64 << 20


def engine() -> str:
    return "re2" if _re2 is not None else "re"


def compile_pattern(pattern: Any, where: str, *, ignorecase: bool = False, multiline: bool = False,
                    groups: int | None = None):
    """Compile a user pattern; InputError naming `where` if it is invalid, unsafe, or has
    the wrong number of groups (`groups`, when given). Returns an object with
    search/groups/groupindex/pattern like re.Pattern."""
    if not isinstance(pattern, str):
        raise InputError(where, f"pattern is {type(pattern).__name__}, expected text")
    if "\x00" in pattern:
        raise InputError(where, "pattern holds a NUL character")
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(where, "pattern holds a lone surrogate: not valid Unicode text") from None
    prefix = ("(?i)" if ignorecase else "") + ("(?m)" if multiline else "")
    if _re2 is not None:
        opts = _re2.Options()
        opts.log_errors = False  # re2 would log to stderr; the error is ours to report
        opts.max_mem = RE2_MAX_MEM
        try:
            rx = _re2.compile(prefix + pattern, options=opts)
        except Exception as exc:  # re2.error; the module raises only this for bad patterns
            msg = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise InputError(where, f"not a valid (linear-time, RE2) regular expression {pattern[:80]!r}: {msg}") from None
    else:
        flags = re.ASCII | (re.IGNORECASE if ignorecase else 0) | (re.MULTILINE if multiline else 0)
        try:
            rx = re.compile(pattern, flags)
        except re.error as exc:
            raise InputError(where, f"not a valid regular expression {pattern[:80]!r}: {exc}") from None
        _refuse_backtracking(pattern, flags, where)
    if groups is not None and rx.groups != groups:
        raise InputError(where, f"pattern {pattern[:80]!r} has {rx.groups} group(s), needs exactly {groups}")
    return rx


def _refuse_backtracking(pattern: str, flags: int, where: str) -> None:
    """Without re2: refuse repetition of something that itself repeats, and backreferences."""
    try:
        import re._parser as sre_parse  # Python >= 3.11
    except ImportError:  # pragma: no cover
        import sre_parse  # type: ignore[no-redef]

    def walk(items, under_repeat: bool) -> None:
        for op, av in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, hi, sub = av
                unbounded = hi is sre_parse.MAXREPEAT or hi > 1
                if unbounded and under_repeat:
                    raise InputError(where, f"pattern {pattern[:80]!r} nests repetition (catastrophic backtracking); "
                                            "install google-re2 or rewrite it")
                walk(sub, under_repeat or unbounded)
            elif name == "SUBPATTERN":
                walk(av[-1], under_repeat)
            elif name == "BRANCH":
                if under_repeat:  # (a|aa)+ backtracks exponentially too
                    raise InputError(where, f"pattern {pattern[:80]!r} repeats an alternation (catastrophic backtracking); "
                                            "install google-re2 or rewrite it")
                for b in av[1]:
                    walk(b, under_repeat)
            elif name in ("GROUPREF", "GROUPREF_EXISTS"):
                raise InputError(where, f"pattern {pattern[:80]!r} uses a backreference; refused without google-re2")
            elif name in ("ASSERT", "ASSERT_NOT"):
                walk(av[1], under_repeat)

    walk(sre_parse.parse(pattern, flags), False)
