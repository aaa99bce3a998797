"""Run a stage function from a Snakemake rule and keep a one-line outcome in the rule's log.

Rules stay thin (one call); the log says what the job did or, on failure, the same
one-line error the CLI prints, so a failed job on a cluster node can be read afterwards.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from .errors import StallcaseError


def logged(log_path: str | os.PathLike, fn: Callable[..., Any], *args, **kwargs) -> Any:
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    inner = getattr(fn, "func", fn)  # a functools.partial names the function it wraps
    name = f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', type(inner).__name__)}"
    try:
        result = fn(*args, **kwargs)
    except StallcaseError as exc:
        with open(log, "a", encoding="utf-8") as fh:
            for line in exc.oneline().splitlines():
                fh.write(f"error: {line}\n")
        raise
    with open(log, "a", encoding="utf-8") as fh:
        summary = result if isinstance(result, str) else type(result).__name__
        fh.write(f"ok: {name} in {time.monotonic() - t0:.2f} s -> {summary}\n")
    return result
