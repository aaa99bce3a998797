"""Run a stage function from a Snakemake rule and keep a one-line outcome in the rule's log.

Rules stay thin (one call); the log says what the job did or, on failure, the same
one-line error the CLI prints, so a failed job on a cluster node can be read afterwards.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from . import numeric_warnings
from .errors import StallcaseError


def logged(log_path: str | os.PathLike, fn: Callable[..., Any], /, *args, **kwargs) -> Any:
    # Positional-only: a stage that writes its own lines to the same log takes `log_path=` too.
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    inner = getattr(fn, "func", fn)  # a functools.partial names the function it wraps
    name = f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', type(inner).__name__)}"
    try:
        # The rule's first argument is its input file (the snapshot, the plan, ...).
        result = numeric_warnings.call(fn, args[0] if args else name, *args, **kwargs)
    except StallcaseError as exc:
        from .cas import heal

        _log_error(log, heal(exc, args).oneline())  # a lost store object: the record that stored it is made out of date
        raise
    except OSError as exc:  # a full disk, a permission: the file it names is the error line (as the CLI prints it)
        _log_error(log, f"{exc.filename or _unnamed(args)}: {exc.strerror or exc}")
        raise
    with open(log, "a", encoding="utf-8") as fh:
        summary = result if isinstance(result, str) else type(result).__name__
        fh.write(f"ok: {name} in {time.monotonic() - t0:.2f} s -> {summary}\n")
    return result


def _unnamed(args: tuple) -> str:
    """Where an OSError that names no file happened, as near as the rule says: the directory
    of the rule's output (its last path argument, by the rule shape), never a function name
    (stages name their files through atomic.naming; this is the last resort)."""
    paths = [a for a in args if isinstance(a, (str, os.PathLike)) and os.sep in os.fspath(a)]
    return f"{Path(paths[-1]).parent} (a file under it)" if paths else f"{Path.cwd()} (a file under it)"


def _log_error(log: Path, message: str) -> None:
    """`error: ...` lines, the ones report/terminal.py brings to the terminal when the run ends."""
    with open(log, "a", encoding="utf-8") as fh:
        for line in message.splitlines():
            fh.write(f"error: {line}\n")
