"""A synthetic incident with many steps, built column-wise (no Python object per row).

    big_incident(steps=1_000_000, kernels_per_step=2, with_kernels=True) -> Incident

Each step of 1 ms on one thread: an outer host span `train_step`, a `data.load_batch` wait
span in every 10th step (a declared wait), `forward` in the others; with kernels, each step
launches `kernels_per_step` kernels through `cudaLaunchKernel` (correlated), a `cudaDeviceSynchronize`
every 50th step, and a longer idle gap every 7th step; NVML clock samples every 100 steps and
scheduler samples at step boundaries every 5th step. Deterministic (no randomness), so the same
call gives the same incident.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from workflow_lib.core import tables
from workflow_lib.core.incident import Incident, source
from pathlib import Path

STEP_NS = 1_000_000


def _table(name: str, cols: dict) -> pa.Table:
    schema = tables.TABLES[name]
    n = len(next(iter(cols.values())))
    arrays = []
    for f in schema:
        v = cols.get(f.name)
        arrays.append(pa.nulls(n, f.type) if v is None else pa.array(v, type=f.type))
    return tables.conform(name, pa.Table.from_arrays(arrays, schema=schema))


def _names(pattern: list[str], idx: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(pattern)).cast(pa.string())


def big_incident(steps: int = 1_000_000, *, kernels_per_step: int = 2, with_kernels: bool = True,
                 with_host: bool = True) -> Incident:
    s = np.arange(steps, dtype=np.int64)
    t0 = 10_000_000
    start = t0 + s * STEP_NS
    end = start + STEP_NS - 1_000
    data = {"steps": _table("steps", {"step_id": s, "thread_id": np.ones(steps, np.int64), "start_ns": start, "end_ns": end})}
    # spans: outer span + one inner span per step
    inner_is_wait = (s % 10) == 3
    sp_start = np.concatenate([start + 1_000, start + 50_000])
    sp_end = np.concatenate([end - 1_000, start + 50_000 + np.where(inner_is_wait, 400_000, 100_000)])
    names = _names(["train_step", "forward", "data.load_batch"],
                   np.concatenate([np.zeros(steps, np.int64), np.where(inner_is_wait, 2, 1)]))
    order = np.lexsort((np.concatenate([np.zeros(steps), np.ones(steps)]), sp_start))
    data["spans"] = _table("spans", {"name": names.take(pa.array(order)), "thread_id": np.ones(2 * steps, np.int64),
                                     "depth": np.concatenate([np.zeros(steps, np.int32), np.ones(steps, np.int32)])[order],
                                     "start_ns": sp_start[order], "end_ns": sp_end[order]})
    observed = {"spans": True, "steps": True}
    if with_host:
        ts = start[::5]
        n = ts.size
        data["sched"] = _table("sched", {"ts_ns": ts, "thread_id": np.ones(n, np.int64), "thread_name": pa.array(["main"] * n),
                                         "state": pa.array(["R"] * n), "cpu_time_ns": (ts - t0) * 9 // 10,
                                         "runqueue_wait_ns": (ts - t0) // 50})
        observed["sched"] = True
    if with_kernels:
        k = kernels_per_step
        ks = np.repeat(start, k) + 600_000 + np.tile(np.arange(k) * 150_000, steps)
        kd = np.repeat(np.where((s % 7) == 5, 20_000, 120_000), k)
        corr = np.arange(steps * k, dtype=np.int64) + 1
        launch = ks - 500_000
        data["kernels"] = _table("kernels", {"name": _names(["gemm", "softmax"], np.tile(np.arange(k) % 2, steps)),
                                             "device": np.zeros(steps * k, np.int32), "stream": np.full(steps * k, 7, np.int64),
                                             "correlation_id": corr, "start_ns": ks, "end_ns": ks + kd})
        sync_steps = start[(s % 50) == 49]
        a_start = np.concatenate([launch, sync_steps + 700_000])
        a_end = np.concatenate([launch + 5_000, sync_steps + 950_000])
        is_sync = np.concatenate([np.zeros(launch.size, bool), np.ones(sync_steps.size, bool)])
        a_names = _names(["cudaLaunchKernel", "cudaDeviceSynchronize"], is_sync.astype(np.int64))
        a_corr = pa.array(np.concatenate([corr, np.zeros(sync_steps.size, np.int64)]),
                          mask=np.concatenate([np.zeros(launch.size, bool), np.ones(sync_steps.size, bool)]))
        order = np.argsort(a_start, kind="stable")
        data["runtime_api"] = _table("runtime_api", {"name": a_names.take(pa.array(order)), "thread_id": np.ones(a_start.size, np.int64),
                                                     "correlation_id": a_corr.take(pa.array(order)), "start_ns": a_start[order],
                                                     "end_ns": a_end[order], "is_sync": is_sync[order]})
        nts = start[::100]
        m = nts.size
        data["nvml"] = _table("nvml", {"device": np.zeros(2 * m, np.int32), "ts_ns": np.concatenate([nts, nts]),
                                       "metric": pa.array(["sm_clock_mhz"] * m + ["max_sm_clock_mhz"] * m),
                                       "value": np.concatenate([np.full(m, 1980.0), np.full(m, 1980.0)]),
                                       "source": pa.array(["poll"] * (2 * m))})
        observed.update(kernels=True, runtime_api=True, nvml=True)
    all_sources = ("kernels", "memcpy", "runtime_api", "spans", "sched", "nvml", "clock_sync", "collectives")
    manifest = {
        "incident_id": "big", "reason": "manual", "producer": "synthetic", "clock": {"host": "monotonic", "unix_minus_host_ns": None},
        "sources": {n: source("observed") if observed.get(n) else source("not_observed", "not in this synthetic case") for n in all_sources},
        "tables": {}, "schema_version": 1, "kind": "incident_manifest", "tables_version": tables.TABLES_VERSION, "created_unix_ns": 0,
    }
    return Incident(path=Path("<synthetic>"), manifest=manifest, tables=data)
