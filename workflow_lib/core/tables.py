"""Arrow schemas of the snapshot tables: the contract between capture/importers and analysis.

All times are int64 nanoseconds on ONE host timeline per incident, named by the
manifest's `clock.host` ("monotonic" for the recorder, "realtime" for Kineto imports).
GPU timestamps are already mapped onto that timeline; the mapping's uncertainty is in
`clock_sync`. A row that was not observed is absent: never fill one in.
`rank` is the distributed rank (null for single-process work).

Version history (bump TABLES_VERSION when a column changes meaning or type):
  1 - first version. (Additive, same version: nullable collectives.gpu_duration_ns; nullable
      steps.items and steps.tokens, the work a step declared; nullable memcpy.src_kind,
      memcpy.dst_kind and memcpy.is_async; nullable role on every table with a rank; the
      span_details table, GC and checkpoint spans' attributes.)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import atomic
# Not to_numpy(), scalars or group_by in the checks: the recorder's writer runs them in the
# workload's process, where those import pandas (workflow_lib/core/arrow.py).
from .arrow import count_negative, values
from .errors import InputError

TABLES_VERSION = 1

_i64, _i32, _f64, _str, _bool = pa.int64(), pa.int32(), pa.float64(), pa.string(), pa.bool_()


def _schema(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=null) for n, t, null in fields])


TABLES: dict[str, pa.Schema] = {
    # Workload boundaries: one row per step (training/inference iteration). A recorder step
    # covers the whole iteration (see capture/recorder.py); items/tokens are the work it
    # declared (null: not declared).
    "steps": _schema(
        ("step_id", _i64, False), ("thread_id", _i64, False),
        ("start_ns", _i64, False), ("end_ns", _i64, False), ("rank", _i32, True),
        ("items", _i64, True), ("tokens", _i64, True),
    ),
    # Host spans (named regions) per thread; depth 0 is outermost.
    "spans": _schema(
        ("name", _str, False), ("thread_id", _i64, False), ("depth", _i32, False),
        ("start_ns", _i64, False), ("end_ns", _i64, False), ("rank", _i32, True),
    ),
    # GPU kernels (CUPTI CONCURRENT_KERNEL or Kineto 'kernel').
    "kernels": _schema(
        ("name", _str, False), ("device", _i32, False), ("stream", _i64, False),
        ("correlation_id", _i64, True), ("start_ns", _i64, False), ("end_ns", _i64, False),
        ("grid_x", _i32, True), ("grid_y", _i32, True), ("grid_z", _i32, True),
        ("block_x", _i32, True), ("block_y", _i32, True), ("block_z", _i32, True),
        ("rank", _i32, True),
    ),
    # Memory copies and memsets on the GPU; kind is HtoD, DtoH, DtoD, HtoH, PtoP or memset.
    # src_kind/dst_kind: the memory each side lives in (pageable, pinned, device, managed,
    # array; null: not observed), from CUPTI's memory kinds or Kineto's "(Pageable -> Device)";
    # is_async: the copy was issued asynchronously (null: not observed). A pageable host side
    # makes the driver stage the copy through a bounce buffer: a transfer problem, not GPU work.
    "memcpy": _schema(
        ("kind", _str, False), ("device", _i32, False), ("stream", _i64, False),
        ("bytes", _i64, True), ("correlation_id", _i64, True),
        ("start_ns", _i64, False), ("end_ns", _i64, False), ("rank", _i32, True),
        ("src_kind", _str, True), ("dst_kind", _str, True), ("is_async", _bool, True),
    ),
    # Host CUDA runtime/driver API calls; is_sync marks calls that block the host on the GPU.
    "runtime_api": _schema(
        ("name", _str, False), ("thread_id", _i64, False), ("correlation_id", _i64, True),
        ("start_ns", _i64, False), ("end_ns", _i64, False), ("is_sync", _bool, False),
        ("rank", _i32, True),
    ),
    # NVML samples in long form. metric: gpu_util_pct, mem_util_pct, sm_clock_mhz,
    # mem_clock_mhz, max_sm_clock_mhz, power_mw, temp_c, mem_used_bytes, clock_event_reasons.
    # source: "poll" (our sampler) or "driver_samples" (nvmlDeviceGetSamples buffer).
    "nvml": _schema(
        ("device", _i32, False), ("ts_ns", _i64, False), ("metric", _str, False),
        ("value", _f64, False), ("source", _str, False), ("rank", _i32, True),
    ),
    # Scheduler evidence per thread from /proc/<pid>/task/<tid>/{stat,schedstat}.
    # state: R running/runnable, S sleeping, D uninterruptible, ...; cpu_time_ns and
    # runqueue_wait_ns are cumulative counters (schedstat fields 1 and 2).
    "sched": _schema(
        ("ts_ns", _i64, False), ("thread_id", _i64, False), ("thread_name", _str, True),
        ("state", _str, False), ("cpu_time_ns", _i64, True), ("runqueue_wait_ns", _i64, True),
        ("timeslices", _i64, True), ("rank", _i32, True),
    ),
    # GPU->host clock calibration: host_ns = gpu_ns + offset_ns, +/- uncertainty_ns.
    "clock_sync": _schema(
        ("source", _str, False), ("ts_host_ns", _i64, False), ("offset_ns", _i64, False),
        ("uncertainty_ns", _i64, False), ("rank", _i32, True),
    ),
    # Collective operations per rank (torch.distributed / NCCL flight recorder / Kineto).
    # gpu_duration_ns: GPU time between the op's start and end CUDA events on its stream
    # (the flight recorder's duration_ms), known even when absolute GPU times are not.
    "collectives": _schema(
        ("rank", _i32, False), ("pg_id", _str, False), ("pg_name", _str, True),
        ("comm_hash", _str, True), ("seq_id", _i64, False), ("p2p_seq_id", _i64, True),
        ("op_type", _str, False), ("input_sizes", _str, True), ("output_sizes", _str, True),
        ("dtypes", _str, True), ("group_size", _i32, True), ("group_ranks", _str, True),
        ("enqueue_ns", _i64, True), ("gpu_start_ns", _i64, True), ("gpu_end_ns", _i64, True),
        ("state", _str, True), ("thread_id", _i64, True), ("record_id", _i64, True),
        ("gpu_duration_ns", _i64, True),
    ),
    # What a few host spans carry besides their times (the in-process capture's Python GC
    # collections and checkpoint saves, capture/inprocess/): the same span is also a row of
    # `spans`, found there by (thread_id, start_ns, name). Null: not known for that span.
    "span_details": _schema(
        ("name", _str, False), ("thread_id", _i64, False), ("start_ns", _i64, False), ("end_ns", _i64, False),
        ("generation", _i32, True), ("objects", _i64, True), ("uncollectable", _i64, True),
        ("bytes", _i64, True), ("rank", _i32, True),
    ),
}

# Every table with a rank also carries the rank's role (FlightRecorder(role=...), capture/job.py):
# nullable, added to each, so a job's producers and consumers stay apart in every analysis.
TABLES = {name: (s.append(pa.field("role", _str, nullable=True)) if "rank" in s.names else s)
          for name, s in TABLES.items()}


def empty(name: str) -> pa.Table:
    return TABLES[name].empty_table()


def conform(name: str, table: pa.Table, where: str | os.PathLike = "<table>", *, schema: pa.Schema | None = None) -> pa.Table:
    """Select and cast a table's columns to the contract schema (extra columns dropped); `schema`:
    another contract than the snapshot's TABLES[name] (a diagnosis' step tables), `name` then
    only names the table in messages."""
    schema = TABLES[name] if schema is None else schema
    seen: set[str] = set()
    twice = sorted({c for c in table.column_names if c in seen or seen.add(c)})
    if twice:  # which of the two is the column? Arrow's column() would raise KeyError
        raise InputError(where, f"table '{name}' has column(s) {', '.join(map(repr, twice))} more than once")
    missing = [f.name for f in schema if f.name not in table.column_names and not f.nullable]
    if missing:
        raise InputError(where, f"table '{name}' lacks required column(s) {', '.join(missing)}")
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InputError(where, f"column '{f.name}' of table '{name}' cannot be {f.type}: {exc}") from None
            if not f.nullable and col.null_count:
                raise InputError(where, f"column '{f.name}' of table '{name}' has {col.null_count} null(s)")
        else:
            col = pa.nulls(table.num_rows, f.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=schema)


def check_table(name: str, table: pa.Table, where: str | os.PathLike = "<table>") -> pa.Table:
    """Conform a table and check what readers check (intervals, steps); returns the conformed table."""
    table = conform(name, table, where)
    _check_intervals(name, table, where)
    return table


def write_table(path: str | os.PathLike, name: str, table: pa.Table) -> Path:
    """Conform and write a table as Parquet, atomically."""
    table = conform(name, table, path)
    return atomic.write_with(path, lambda tmp: _write_parquet(table, tmp))


def _utf8_path(path: str | os.PathLike) -> bool:
    # Arrow takes paths as UTF-8 strings; a file name with non-UTF-8 bytes (surrogate-escaped
    # by Python) must go through an open Python file instead.
    try:
        os.fspath(path).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _write_parquet(table: pa.Table, dest: Path) -> None:
    if _utf8_path(dest):
        pq.write_table(table, dest, compression="zstd")
    else:
        with open(dest, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")


def read_table(path: str | os.PathLike, name: str) -> pa.Table:
    """Read a Parquet table and check it against the contract; one-line InputError on any problem."""
    try:
        # One open file for the footer check and the read: the bytes checked are the bytes
        # read, and ParquetFile.read() needs no pyarrow.dataset (pq.read_table imports it:
        # ~0.4 s in every process that reads an incident).
        with open(path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            _check_footer(pf.metadata, name, path)
            table = pf.read()
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(path, "table file not found") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable Parquet file ({str(exc).splitlines()[0][:200]})") from None
    table = conform(name, table, path)
    _check_intervals(name, table, path)
    return table


def _check_footer(meta, name: str, where) -> None:
    """Refuse from the footer alone what would expand past the caps: an RLE page holds 30M
    rows in a few KB, so the file size says nothing about the memory reading it takes."""
    from . import bounds

    rows, cols = meta.num_rows, meta.num_columns
    raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if rows > bounds.MAX_TABLE_ROWS:
        raise InputError(where, f"table '{name}' has {rows} rows, over the limit of {bounds.MAX_TABLE_ROWS}")
    if rows * cols > bounds.MAX_TABLE_CELLS:
        raise InputError(where, f"table '{name}' has {rows} rows x {cols} columns, over the limit of {bounds.MAX_TABLE_CELLS} cells")
    if raw > bounds.MAX_TABLE_BYTES:
        raise InputError(where, f"table '{name}' expands to {raw} bytes, over the limit of {bounds.MAX_TABLE_BYTES}")
    return raw


def footer_bytes(path: str | os.PathLike, name: str) -> int:
    """Checked footer of a table file: its uncompressed size in bytes (InputError on a bad file)."""
    try:
        with open(path, "rb") as fh:
            return _check_footer(pq.ParquetFile(fh).metadata, name, path)
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable Parquet file ({str(exc).splitlines()[0][:200]})") from None


def _check_intervals(name: str, table: pa.Table, where) -> None:
    import pyarrow.compute as pc

    if "start_ns" in table.column_names and "end_ns" in table.column_names and table.num_rows:
        bad = pc.sum(pc.less(table["end_ns"], table["start_ns"])).as_py() or 0
        if bad:
            raise InputError(where, f"table '{name}' has {bad} row(s) with end_ns before start_ns (reversed timestamps)")
        neg = count_negative(table["start_ns"])
        if neg:
            raise InputError(where, f"table '{name}' has {neg} row(s) with negative start_ns")
    if name == "steps" and table.num_rows:
        # A step id is unique per rank (every rank runs step 7); a null rank is its own rank.
        rank, step = values(table["rank"], null=np.iinfo(np.int32).min), values(table["step_id"])
        order = np.lexsort((step, rank))
        rank, step = rank[order], step[order]
        if np.any((rank[1:] == rank[:-1]) & (step[1:] == step[:-1])):
            raise InputError(where, "table 'steps' has duplicate step_id values within a rank")
    if name == "steps" and table.num_rows > 1:
        _check_step_clock(table, where)
    for col in ("ts_ns", "ts_host_ns", "uncertainty_ns"):
        if col in table.column_names and table.num_rows:
            neg = count_negative(table[col])
            if neg:
                raise InputError(where, f"table '{name}' has {neg} row(s) with negative {col}")


def _check_step_clock(table: pa.Table, where) -> None:
    """One thread's steps end in step-id order. A later step that ends before an earlier one
    ended means the clock went backwards (or the ids lie). Overlap alone is allowed: the
    sidecar dates a step's start as read time minus the printed duration, an estimate."""
    rank = values(table["rank"])  # nulls as -1
    order = np.lexsort((values(table["step_id"]), values(table["thread_id"]), rank))
    tid, rk, end = values(table["thread_id"])[order], rank[order], values(table["end_ns"])[order]
    same = (tid[1:] == tid[:-1]) & (rk[1:] == rk[:-1])
    back = int(np.count_nonzero(same & (end[1:] < end[:-1])))
    if back:
        raise InputError(where, f"table 'steps' has {back} step(s) ending before the previous step of the same thread "
                                "ended: the clock went backwards")
