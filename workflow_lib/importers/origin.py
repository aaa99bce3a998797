"""Checks on the tables an importer derives, reported against the user's input file and field.

An importer turns a trace into contract tables; some problems only show once converted (a
device id that does not fit the int32 column, steps whose ends go backwards). Checked when
the tables are written, they would name `<incident>/tables/kernels.parquet`, a file stallcase
was about to write and the user never saw. Checked here first, per input file, the one line
names the trace and the trace's own field.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa

from ..core import tables
from ..core.errors import InputError

# (table, column) -> the Kineto field it is read from (importers/kineto_events.py).
KINETO_FIELDS: dict[tuple[str, str], str] = {
    **{(t, "device"): f"args.device of its {w} events" for t, w in (("kernels", "kernel"), ("memcpy", "gpu_memcpy/memset"))},
    **{(t, "stream"): f"args.stream of its {w} events" for t, w in (("kernels", "kernel"), ("memcpy", "gpu_memcpy/memset"))},
    **{(t, "correlation_id"): "args.correlation of its events" for t in ("kernels", "memcpy", "runtime_api")},
    **{(t, "thread_id"): "tid of its events" for t in ("runtime_api", "spans", "steps")},
    **{(t, "bytes"): "args.bytes of its events" for t in ("memcpy",)},
    ("steps", "end_ns"): "ts + dur of its step spans",
    ("steps", "step_id"): "the step number in its step span names",
}
_COLUMN = re.compile(r"column '([^']+)'")


def checked(name: str, table: pa.Table, source: str | os.PathLike, fields: dict[tuple[str, str], str]) -> pa.Table:
    """`table` conformed and checked as a reader checks it; an error names `source` and its field."""
    try:
        return tables.check_table(name, table, source)
    except InputError as exc:
        m = _COLUMN.search(exc.problem)  # tables.conform names the column it could not take
        col = m.group(1) if m else ("end_ns" if "clock went backwards" in exc.problem else
                                    "step_id" if "duplicate step_id" in exc.problem else None)
        field = fields.get((name, col)) if col else None
        raise InputError(source, f"{exc.problem} (from {field})" if field else
                         f"{exc.problem} (in the {name} table derived from it)") from None
