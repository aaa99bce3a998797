"""Warnings from numeric code become one error line naming the input, never stray lines.

numpy and pandas report a NaN cast to an integer, an overflow or a division by zero with a
`RuntimeWarning` printed to stderr, and the computation goes on with a garbage value (NaN cast
to int64 is -2**63). Input that makes numeric code warn has a value the code did not expect, so
at each stage boundary (the CLI's commands, the rules through rulelog) the warning is raised as
an error and reported as `error: <input>: ...`. Code that expects such values says so where it
computes them (`np.errstate(invalid="ignore")`, which never reaches the warnings module).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable

from .errors import InputError


def call(fn: Callable[..., Any], where: str | os.PathLike | None, *args, **kwargs) -> Any:
    """fn(*args, **kwargs) with RuntimeWarnings raised; one InputError naming `where` instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            return fn(*args, **kwargs)
        except RuntimeWarning as w:
            raise InputError(where, f"holds values the numeric code cannot use ({' '.join(str(w).split())[:160]}): "
                                    "a NaN, an infinity or a number out of range where a count or a time belongs") from None


def named_input(args: Any) -> str | None:
    """The input a CLI command was given (its positional argument), for the error line."""
    for attr in ("incident_dir", "incidents", "files", "configfiles", "root", "incident"):
        v = getattr(args, attr, None)
        if v:
            return ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return f"stallcase {getattr(args, 'command', '')}".strip()
