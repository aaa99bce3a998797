"""Snapshot assembly: what `rec.snapshot()` hands the writer (writer.py) and what the writer
thread builds from it.

On the workload's thread `take` only copies the rings and enqueues a job (bounded: a write
slot, or the snapshot is dropped and counted). On the writer thread `build` turns the copies
into Arrow tables clipped to the retained window, with each source's manifest entry, the
process's provenance, and the run's job section.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..core import arrow
from ..core.incident import source
from . import gpu_arming, ranks
from . import writer as writer_module
from .clock import HOST_CLOCK, now_ns
from .sources import collectives as collectives_source
from .writer import Job

SNAPSHOT_WAIT_S = 120.0


def next_path(rec, reason: str, automatic: bool) -> Path:
    n = next(rec._snap_n)
    base = Path(rec.incidents_dir)
    if automatic:  # one rank's own moment: never merged, named per rank
        rank = "" if rec.rank is None else f".rank{rec.rank}"
        return base / f"{rec.incident_id}.{reason}-{n}{rank}"
    if rec.rank is not None:  # ranks share the directory: the writer merges (capture/ranks.py)
        return base / (rec.incident_id if n == 1 else f"{rec.incident_id}.{n}")
    path = base / rec.incident_id
    if (path / "manifest.json").exists():
        path = base / f"{rec.incident_id}.{n}"
    return path



def take(rec, reason: str, wait: bool, automatic: bool) -> Path | None:
    # Automatic triggers never wait (excess is dropped and counted); an explicit
    # snapshot that the caller waits for may wait its turn for a write slot.
    if not rec.writer.try_reserve(0.0 if (automatic or not wait) else SNAPSHOT_WAIT_S):
        rec.dropped_snapshots += 1
        return None
    until = now_ns()
    since = until - rec.budget.window_ns
    path = next_path(rec, reason, automatic)
    copies = {}
    if rec.host is not None:
        copies["spans"], copies["steps"] = rec.host.spans.copy(), rec.host.steps.copy()
        copies["span_details"] = rec.host.details.copy()
    for name, src in (("sched", rec.sched), ("nvml", rec.nvml)):
        if src is not None:
            copies[name] = src.ring.copy()
    trig = rec.trigger.describe() if (automatic and rec.trigger is not None) else None
    write = None
    if rec.rank is not None and not automatic:
        write = functools.partial(ranks.write_rank, root_id=rec.incident_id, write=writer_module.write_incident_now)
    job = Job(lambda: build(rec, path, reason, trig, copies, since, until), write)
    rec.writer.submit(job)
    if not wait:
        return path
    if not job.done.wait(SNAPSHOT_WAIT_S):
        rec._error(f"snapshot {path.name}: still writing after {SNAPSHOT_WAIT_S:.0f} s")
        return None
    if job.error:
        rec.failed_snapshots += 1
        return None
    return job.path or path



def build(rec, path: Path, reason: str, trig, copies: dict, since: int, until: int):
    """On the writer thread: tables, provenance, manifest."""
    tables, sources = {}, {}
    lo = None
    if rec.host is not None:
        tables["spans"] = drop_paused(rec.host.spans_table(copies["spans"], since, until),
                                       rec.paused_intervals(since, until))
        tables["steps"] = rec.host.steps_table(copies["steps"], since, until)
        details = rec.host.details_table(copies["span_details"], since, until)
        if details.num_rows:
            tables["span_details"] = details
        sources["host"] = source("observed", None, **host_detail(rec, copies, tables))
    else:
        sources["host"] = source("not_observed", rec._why_not("host"))
    if rec.sched is not None:
        tables["sched"] = rec.sched.table(copies["sched"], since, until)
        sources["sched"] = rec.sched.manifest_entry(copies["sched"])
    else:
        sources["sched"] = source("not_observed", rec._why_not("sched"))
    if rec.nvml is not None:
        tables["nvml"] = rec.nvml.table(copies["nvml"], since, until)
        sources["nvml"] = rec.nvml.manifest_entry(copies["nvml"])
    else:
        sources["nvml"] = source("not_observed", rec._why_not("nvml"))
    if rec.cupti is not None:
        # Flush here, on the writer thread: records of work before `until` arrive now.
        rec.cupti.flush()
        cc = rec.cupti.copies()
        tables.update(rec.cupti.tables(cc, since, until))
        sources["cupti"] = rec.cupti.manifest_entry(cc, since, until)
        # Per step, which had GPU activity recorded (gpu_arming.py); windows whose kernels the
        # ring overwrote no longer count.
        detail = sources["cupti"]["detail"]
        detail["windows"] = gpu_arming.clip_windows(detail["windows"], tables.get("kernels"),
                                                    getattr(cc.get("kernels"), "overwritten", 0))
        detail["steps"] = gpu_arming.step_coverage(tables.get("steps"), detail["windows"])
        if "runtime_api" in tables and not rec.cupti.thread_ids.startswith("system"):
            tables["runtime_api"], mapped = native_thread_ids(tables["runtime_api"])
            sources["cupti"]["detail"]["thread_ids"] = mapped
    else:
        sources["cupti"] = source("not_observed", rec._why_not("cupti"))
    if "collectives" in rec.requested and rec.enabled:
        ctable, sources["collectives"] = collectives_source.collect(rec.rank, rec.unix_minus_host_ns)
        if ctable is not None:
            tables["collectives"] = ctable
    else:
        sources["collectives"] = source("not_observed", rec._why_not("collectives"))
    for name, t in tables.items():
        if t.num_rows == 0:
            continue
        col = next((c for c in ("ts_ns", "start_ns") if c in t.column_names), None)
        if col is None:  # clock_sync rows are calibrations, not observations of the window
            continue
        a = int(np.min(arrow.values(t[col])))
        lo = a if lo is None else min(lo, a)
    if rec.rank is not None:
        tables = {n: t if "rank" in t.column_names else
                  t.append_column("rank", arrow.numbers(np.full(t.num_rows, rec.rank, np.int32), pa.int32()))
                  for n, t in tables.items()}
    if rec.role is not None:
        # core/arrow builds columns from buffers: pa.array() imports pandas (0.25 s in each recording process)
        tables = {n: t.append_column("role", arrow.strings([rec.role] * t.num_rows))
                  if "role" not in t.column_names else t for n, t in tables.items()}
    prov, artifacts, workload = rec._provenance()
    manifest = {
        "incident_id": path.name,
        "reason": reason,
        "trigger": trig,
        "producer": "recorder",
        "clock": {"host": HOST_CLOCK, "unix_minus_host_ns": rec.unix_minus_host_ns},
        "window": {"start_ns": max(0, lo if lo is not None else since), "end_ns": until},
        "sources": sources,
        "ranks": [rec.rank] if rec.rank is not None else [],
        "provenance": prov,
        "artifacts": artifacts,
        "workload": workload,
        "recorder": rec.report(),
        "job": rec._run_section(),
    }
    if rec.launcher is not None:
        # The job is the launcher's command: the plan rebuilds it whole, never one rank.
        manifest["workload"] = dict(workload, argv=list(rec.launcher["argv"]), cwd=os.getcwd())
    override = getattr(rec, "workload_override", None)
    if override:  # in-process capture: the whole wrapped command (inprocess/runner.py)
        manifest["workload"] = dict(manifest["workload"], argv=list(override["argv"]), cwd=override["cwd"])
    if rec.producer != "recorder":
        manifest["producer"] = rec.producer
    return path, manifest, tables



def host_detail(rec, copies, tables) -> dict:
    return {"spans_written": copies["spans"].written, "spans_overwritten": copies["spans"].overwritten,
            "spans_capacity": rec.host.spans.capacity, "steps_written": copies["steps"].written,
            "steps_overwritten": copies["steps"].overwritten, "steps_capacity": rec.host.steps.capacity,
            "span_names_over_budget": rec.host.names_over_budget,
            "steps_repeated_ids_dropped": rec.host.last_repeated_step_ids,
            "depth": "derived from nesting among retained spans of a thread",
            "thread_id": "Linux tid"}



def drop_paused(table: pa.Table, intervals: list[list[int]]) -> pa.Table:
    """Rows of `table` whose start_ns lies in no paused interval (a row keeps the state it
    began in, as a step does)."""
    if not intervals or table.num_rows == 0:
        return table
    start = arrow.values(table["start_ns"])
    edges = np.asarray(intervals, np.int64)
    pos = np.searchsorted(edges[:, 0], start, side="right") - 1
    inside = (pos >= 0) & (start < edges[np.maximum(pos, 0), 1])
    return table.filter(arrow.bools(~inside)) if inside.any() else table




def native_thread_ids(table: pa.Table) -> tuple[pa.Table, dict]:
    """CUPTI names a thread by its pthread id; spans, steps and sched use Linux tids.

    Python's `Thread.ident` is the pthread id and `native_id` the tid, so threads alive at
    snapshot time are mapped; others (threads that ended, or non-Python threads such as
    NCCL's) keep CUPTI's id, and the detail says how many were mapped.
    """
    ident_to_tid = {}
    for t in threading.enumerate():
        if t.ident is not None and t.native_id is not None:
            # CUpti_ActivityAPI.threadId is 32 bits wide: CUPTI keeps the low half of pthread_t.
            ident_to_tid[t.ident] = t.native_id
            ident_to_tid.setdefault(t.ident & 0xFFFFFFFF, t.native_id)
    tids = arrow.values(table["thread_id"])
    uniq = np.unique(tids)
    mapped = {int(u): ident_to_tid[int(u)] for u in uniq if int(u) in ident_to_tid}
    if mapped:
        keys = np.fromiter(mapped.keys(), np.int64)
        vals = np.fromiter(mapped.values(), np.int64)
        order = np.argsort(keys)
        pos = np.searchsorted(keys[order], tids).clip(0, len(keys) - 1)
        hit = keys[order][pos] == tids
        tids = np.where(hit, vals[order][pos], tids)
        table = table.set_column(table.column_names.index("thread_id"), "thread_id", arrow.numbers(tids))
    return table, {"cupti_thread_ids": int(uniq.size), "mapped_to_linux_tid": len(mapped),
                   "rule": "pthread id (Thread.ident) -> Linux tid (Thread.native_id) for threads alive at snapshot"}

