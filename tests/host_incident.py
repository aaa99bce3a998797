"""A seeded synthetic incident for the host-side checks (host_submission, cpu_contention):
several threads that launch, spans and waits on two threads, scheduler samples near some
step boundaries, dense around some gaps, sparse or absent elsewhere (some counters missing),
kernels with and without correlation ids, optional clock_sync rows.

    host_incident(seed, steps=300, clock="rows" | "none" | "kineto", runtime_api=True, sched=True) -> Incident

clock="rows": a clock_sync table whose uncertainty is wide for the shortest gaps;
"none": no clock_sync (the producer is not Kineto: the uncertainty is not measured);
"kineto": no clock_sync, a Kineto producer (one timebase, accepted unmeasured).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from workflow_lib.core import tables
from workflow_lib.core.incident import Incident, source

SOURCES = ("kernels", "memcpy", "runtime_api", "spans", "sched", "nvml", "clock_sync", "collectives")
CLOCK_UNCERTAINTY_NS = 4_000  # wide (>= 0.1 x the gap) for gaps up to 40 us


def _table(name: str, rows: dict) -> pa.Table:
    schema = tables.TABLES[name]
    n = len(next(iter(rows.values())))
    cols = [pa.nulls(n, f.type) if rows.get(f.name) is None else pa.array(rows[f.name], type=f.type) for f in schema]
    t = pa.Table.from_arrays(cols, schema=schema)
    if "start_ns" in t.column_names:
        t = t.sort_by([("start_ns", "ascending")])
    return tables.conform(name, t)


def _steps(rng, n):
    starts, ends, tids = [], [], []
    t = 1_000_000
    for _ in range(n):
        wall = int(rng.integers(300_000, 1_500_000))
        starts.append(t)
        ends.append(t + wall)
        tids.append(3 if rng.random() < 0.1 else 1)  # a few steps on another thread
        t += wall + (0 if rng.random() < 0.5 else int(rng.integers(1, 200_000)))  # some adjacent
    return np.array(starts), np.array(ends), np.array(tids)


def _gpu_and_calls(rng, starts, ends):
    k, api = {"start_ns": [], "end_ns": [], "correlation_id": []}, {"name": [], "thread_id": [], "start_ns": [],
                                                                      "end_ns": [], "correlation_id": [], "is_sync": []}
    corr = 0

    def call(name, tid, a, d, c=None, sync=False):
        api["name"].append(name), api["thread_id"].append(tid), api["start_ns"].append(a)
        api["end_ns"].append(a + d), api["correlation_id"].append(c), api["is_sync"].append(sync)

    for lo, hi in zip(starts.tolist(), ends.tolist()):
        for a in sorted(rng.integers(lo, hi, int(rng.integers(0, 9))).tolist()):
            corr += 1
            k["start_ns"].append(a)
            k["end_ns"].append(min(a + int(rng.integers(5_000, 200_000)), hi + 50_000))
            known = rng.random() > 0.08
            k["correlation_id"].append(corr if known else None)
            if rng.random() > 0.05:  # a launch row; some dropped: the kernel's id matches nothing
                call("cudaLaunchKernel", 2 if rng.random() < 0.3 else 1, a - int(rng.integers(1_000, 300_000)), 3_000, corr)
        if rng.random() < 0.2:
            call("cudaStreamSynchronize", 1, int(rng.integers(lo, hi)), int(rng.integers(10_000, 200_000)), sync=True)
        if rng.random() < 0.1:
            call("cudaMalloc", 1, int(rng.integers(lo, hi)), int(rng.integers(10_000, 100_000)))
        for _ in range(int(rng.integers(0, 3))):  # non-synchronizing calls: the host busy in CUDA
            call("cudaEventRecord", int(rng.choice([1, 2])), int(rng.integers(lo, hi)), int(rng.integers(20_000, 150_000)))
    n = len(k["start_ns"])
    kern = _table("kernels", {"name": ["gemm"] * n, "device": [0] * n, "stream": [7] * n, **k})
    return kern, _table("runtime_api", api)


def _spans(rng, starts, ends):
    sp = {"name": [], "thread_id": [], "depth": [], "start_ns": [], "end_ns": []}
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        if rng.random() < 0.2:  # an outer span over the whole step: every gap is in user code
            sp["name"].append("train_step"), sp["thread_id"].append(1), sp["depth"].append(0)
            sp["start_ns"].append(lo), sp["end_ns"].append(hi)
        for _ in range(int(rng.integers(0, 4))):
            a = int(rng.integers(lo, hi))
            name = "data.load_batch" if rng.random() < 0.15 else str(rng.choice(["forward", "backward", "optimizer"]))
            sp["name"].append(name), sp["thread_id"].append(int(rng.choice([1, 2]))), sp["depth"].append(1)
            sp["start_ns"].append(a), sp["end_ns"].append(a + int(rng.integers(10_000, 250_000)))
    return _table("spans", sp)


def _sched(rng, starts, ends):
    ts, tid = [], []
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        if rng.random() < 0.6:  # the recorder's boundary samples, jittered around the tolerance
            for t in (lo, hi):
                ts.append(t + int(rng.integers(-260_000, 260_000))), tid.append(1)
        if rng.random() < 0.4:  # thread 2 near the boundaries now and then
            ts.append(lo + int(rng.integers(-150_000, 150_000))), tid.append(2)
            ts.append(hi + int(rng.integers(-150_000, 150_000))), tid.append(2)
        if rng.random() < 0.25:  # dense samples inside the step: they bracket its gaps closely
            pts = range(lo, hi, int(rng.integers(8_000, 60_000)))
            ts += list(pts)
            tid += [int(rng.choice([1, 2]))] * len(pts)
    if ts:
        ts.append(ts[-1]), tid.append(tid[-1])  # a duplicate timestamp: a zero span
    ts, tid = np.array(ts, np.int64), np.array(tid, np.int64)
    order = np.lexsort((ts, tid))
    ts, tid = ts[order], tid[order]
    cpu = np.zeros(ts.size, np.int64)
    rq = np.zeros(ts.size, np.int64)
    for t in np.unique(tid).tolist():
        m = np.flatnonzero(tid == t)
        dt = np.diff(ts[m], prepend=ts[m][0])
        frac = np.where(rng.random(m.size) < 0.3, rng.uniform(0.05, 0.6, m.size), rng.uniform(0, 0.01, m.size))
        rq[m] = np.cumsum((dt * frac).astype(np.int64))
        cpu[m] = np.cumsum((dt * rng.uniform(0.2, 0.9, m.size)).astype(np.int64))
    unknown = rng.random(ts.size) < 0.04
    state = np.where(rng.random(ts.size) < 0.7, "R", "S")
    return _table("sched", {"ts_ns": ts, "thread_id": tid, "state": state.tolist(),
                            "cpu_time_ns": pa.array(cpu, mask=unknown), "runqueue_wait_ns": pa.array(rq, mask=unknown)})


def host_incident(seed: int, steps: int = 300, *, clock: str = "rows", runtime_api: bool = True, sched: bool = True) -> Incident:
    rng = np.random.default_rng(seed)
    starts, ends, tids = _steps(rng, steps)
    data = {"steps": _table("steps", {"step_id": np.arange(steps), "thread_id": tids, "start_ns": starts, "end_ns": ends})}
    data["kernels"], api = _gpu_and_calls(rng, starts, ends)
    data["spans"] = _spans(rng, starts, ends)
    observed = {"steps", "kernels", "spans"}
    if runtime_api:
        data["runtime_api"] = api
        observed.add("runtime_api")
    if sched:
        data["sched"] = _sched(rng, starts, ends)
        observed.add("sched")
    if clock == "rows":
        data["clock_sync"] = _table("clock_sync", {"source": ["cupti"] * 3, "ts_host_ns": [int(starts[0])] * 3,
                                                   "offset_ns": [0] * 3, "uncertainty_ns": [1_000, CLOCK_UNCERTAINTY_NS, 2_000]})
        observed.add("clock_sync")
    manifest = {
        "incident_id": f"host-{seed}", "reason": "manual", "producer": "kineto-import" if clock == "kineto" else "synthetic",
        "clock": {"host": "monotonic", "unix_minus_host_ns": None},
        "sources": {n: source("observed") if n in observed else source("not_observed", "not in this synthetic case") for n in SOURCES},
        "tables": {}, "schema_version": 1, "kind": "incident_manifest", "tables_version": tables.TABLES_VERSION, "created_unix_ns": 0,
    }
    return Incident(path=Path("<synthetic>"), manifest=manifest, tables=data)


def bracket_tie_incident() -> Incident:
    """Two 1 ms steps, each with one 200 us GPU gap [100, 300) us and nothing of its thread at
    the gap but scheduler samples around it: 400 us apart in step 0 (exactly the 2x the rule
    allows), 400 us + 1 ns in step 1 (just over), none near the step boundaries."""
    starts = np.array([0, 2_000_000]) + 1_000_000
    rows = {"k": ([], []), "api": [], "ts": []}
    for j, lo in enumerate(starts.tolist()):
        rows["k"][0].extend([lo, lo + 300_000])
        rows["k"][1].extend([lo + 100_000, lo + 1_000_000])
        rows["api"].extend([lo - 50_000, lo + 150_000])  # the second kernel launched inside the gap
        rows["ts"].extend([lo, lo + 400_000 + j])
    n = len(rows["api"])
    data = {
        "steps": _table("steps", {"step_id": [0, 1], "thread_id": [1, 1], "start_ns": starts, "end_ns": starts + 1_000_000}),
        "kernels": _table("kernels", {"name": ["gemm"] * n, "device": [0] * n, "stream": [7] * n, "correlation_id": list(range(1, n + 1)),
                                      "start_ns": rows["k"][0], "end_ns": rows["k"][1]}),
        "runtime_api": _table("runtime_api", {"name": ["cudaLaunchKernel"] * n, "thread_id": [1] * n, "correlation_id": list(range(1, n + 1)),
                                              "start_ns": rows["api"], "end_ns": [a + 3_000 for a in rows["api"]], "is_sync": [False] * n}),
        "sched": _table("sched", {"ts_ns": rows["ts"], "thread_id": [1] * len(rows["ts"]), "state": ["R"] * len(rows["ts"]),
                                  "cpu_time_ns": [0, 300_000, 400_000, 700_000], "runqueue_wait_ns": [0, 10_000, 20_000, 30_000]}),
    }
    observed = {"steps", "kernels", "runtime_api", "sched"}
    manifest = {
        "incident_id": "bracket-tie", "reason": "manual", "producer": "kineto-import", "clock": {"host": "monotonic", "unix_minus_host_ns": None},
        "sources": {n: source("observed") if n in observed else source("not_observed", "not in this synthetic case") for n in SOURCES},
        "tables": {}, "schema_version": 1, "kind": "incident_manifest", "tables_version": tables.TABLES_VERSION, "created_unix_ns": 0,
    }
    return Incident(path=Path("<synthetic>"), manifest=manifest, tables=data)
