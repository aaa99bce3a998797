"""Incidents and full record sets for the report tests.

    rich_incident(path)            two ranks, every source, known findings (tests/builders.py rows)
    million_event_incident(path)   ~1,000,000 events, generated column-wise (NumPy), one rank
    results_for(incident_dir, results_dir, trials=True)
        -> (snapshot, diagnosis, plan, comparison) paths under results_dir/<id>/, with
           preflight/ and execution/ records beside plan.json, as the workflow lays them out
    pointed(path, kind)            a record as the report's data-src pointers address it (a
                                   diagnosis' "/steps/i/..." is row i of its steps table)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks import compare_builders as CB
from builders import api, clock, kernel, make_incident, memcpy, nvml, span, step
from workflow_lib.compare import build as compare
from workflow_lib.core import records, tables
from workflow_lib.core.cas import CAS
from workflow_lib.diagnose import diagnose_snapshot_file
from workflow_lib.core.incident import source, write_incident
from workflow_lib.snapshot.build import ingest

MS = 1_000_000


def pointed(path: Path, kind: str) -> dict:
    """The record at `path`; a diagnosis with its steps read back from its tables, so that
    "diagnosis:/steps/3/wall_ns" resolves to row 3 of the steps table."""
    if kind != "diagnosis":
        return records.read_record(path, kind)
    from workflow_lib.diagnose import load_diagnosis

    d = load_diagnosis(path)
    return dict(d.record, steps=d.steps())


def _collective(rank: int, seq: int, start_ns: int, end_ns: int) -> dict:
    return {"rank": rank, "pg_id": "0", "pg_name": "default_pg", "comm_hash": None, "seq_id": seq, "p2p_seq_id": None,
            "op_type": "allreduce", "input_sizes": "[[1048576]]", "output_sizes": "[[1048576]]",
            "dtypes": '{"input": ["Float"], "output": ["Float"]}',
            "group_size": 2, "group_ranks": "[0, 1]", "enqueue_ns": start_ns - 20_000, "gpu_start_ns": start_ns,
            "gpu_end_ns": end_ns, "state": "completed", "thread_id": 1, "record_id": seq}


def rich_incident(path: Path, incident_id: str = "rich", steps_per_rank: int = 6):
    """Two ranks of a training loop joined by an allreduce per step. Rank 1 is input-starved in
    step 3, so rank 0 waits 6 ms in that allreduce for it (the sawtooth on the early rank); both
    sync every step; NVML utilization and SM clock (dropping half way) sampled on both GPUs."""
    rows: dict[str, list] = {k: [] for k in ("steps", "kernels", "memcpy", "runtime_api", "spans", "nvml", "clock_sync", "collectives")}
    t = 0
    for i in range(steps_per_rank):
        starve = {0: 0, 1: 6 * MS if i == 3 else 0}
        arrive = {r: t + 1 * MS + starve[r] + 6_500_000 for r in (0, 1)}
        coll_end = max(arrive.values()) + 1_500_000  # no rank finishes before the last one arrives
        end = coll_end + 1 * MS
        for r in (0, 1):
            tid = 100 + r
            rows["steps"].append(step(i, t, end, thread_id=tid, rank=r))
            rows["spans"].append(span("train_step", t, end, thread_id=tid, rank=r))
            rows["spans"].append(span("dataloader_next/worker~0", t, t + 1 * MS + starve[r], thread_id=tid, depth=1, rank=r))
            k0 = t + 1 * MS + starve[r]
            for j in range(20):  # forward/backward kernels, two streams
                ks = k0 + j * 300_000
                rows["runtime_api"].append(api(ks - 20_000, ks - 10_000, thread_id=tid, corr=i * 100 + j, rank=r))
                rows["kernels"].append(kernel(ks, ks + 250_000, name="sm90_gemm" if j % 2 else "elementwise",
                                              stream=7 + (j % 2), corr=i * 100 + j, device=r, rank=r))
            rows["memcpy"].append(memcpy(k0 - 200_000, k0 - 100_000, device=r, nbytes=1 << 20, rank=r))
            rows["collectives"].append(_collective(r, i, arrive[r], coll_end))
            rows["kernels"].append(kernel(arrive[r], coll_end, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                          stream=9, device=r, rank=r))
            rows["runtime_api"].append(api(end - 900_000, end - 100_000, name="cudaStreamSynchronize",
                                           thread_id=tid, is_sync=True, rank=r))
        t = end
    for r in (0, 1):
        for ts in range(0, t, 2 * MS):
            rows["nvml"].append(nvml(ts, "gpu_util_pct", 60 + 30 * ((ts // MS) % 3 == 0), device=r, rank=r))
            rows["nvml"].append(nvml(ts, "sm_clock_mhz", 1980 if ts < t // 2 else 1410, device=r, rank=r))
        rows["nvml"].append(nvml(0, "max_sm_clock_mhz", 1980, device=r, rank=r))
        rows["clock_sync"].append(clock(0, 500, rank=r))
    steps = rows.pop("steps")
    return make_incident(steps=steps, incident_id=incident_id, producer="synthetic", write_to=path, **rows)


def million_event_incident(path: Path, n_steps: int = 1000, kernels_per_step: int = 800, incident_id: str = "million",
                           seed: int = 0) -> Path:
    """~1M events: per step 800 kernels on 4 streams, 100 launch calls, 100 host spans; one
    NVML sample of each metric per ms. Built column-wise: builders' row dicts are per-event."""
    rng = np.random.default_rng(seed)
    step_ns = 5 * MS
    steps_start = np.arange(n_steps, dtype=np.int64) * step_ns
    walls = np.full(n_steps, step_ns - 10_000, dtype=np.int64)
    walls[rng.choice(n_steps, n_steps // 20, replace=False)] = step_ns - 10_000  # keep steps disjoint
    k_off = np.sort(rng.integers(500_000, step_ns - 50_000, size=(n_steps, kernels_per_step)), axis=1)
    k_start = (steps_start[:, None] + k_off).ravel()
    k_dur = rng.integers(1_000, 20_000, size=k_start.size)
    n_k = k_start.size
    a_per = 100
    a_start = (steps_start[:, None] + np.linspace(10_000, 400_000, a_per, dtype=np.int64)[None, :]).ravel()
    s_start = (steps_start[:, None] + np.linspace(0, step_ns - 200_000, a_per, dtype=np.int64)[None, :]).ravel()
    n_a = a_start.size
    ts = np.arange(0, n_steps * step_ns, MS, dtype=np.int64)
    data = {
        "steps": pa.table({"step_id": np.arange(n_steps, dtype=np.int64), "thread_id": np.ones(n_steps, np.int64),
                           "start_ns": steps_start, "end_ns": steps_start + walls, "rank": pa.nulls(n_steps, pa.int32())}),
        "kernels": pa.table({"name": pa.array(np.array(["gemm", "elementwise", "reduce", "copy_kernel"])[np.arange(n_k) % 4]),
                             "device": np.zeros(n_k, np.int32), "stream": (7 + np.arange(n_k) % 4).astype(np.int64),
                             "correlation_id": np.arange(n_k, dtype=np.int64), "start_ns": k_start, "end_ns": k_start + k_dur}),
        "runtime_api": pa.table({"name": pa.array(["cudaLaunchKernel"] * n_a), "thread_id": np.ones(n_a, np.int64),
                                 "start_ns": a_start, "end_ns": a_start + 3_000, "is_sync": np.zeros(n_a, bool)}),
        "spans": pa.table({"name": pa.array(np.array(["forward", "backward", "optimizer", "dataloader_next"])[np.arange(n_a) % 4]),
                           "thread_id": np.ones(n_a, np.int64), "depth": np.zeros(n_a, np.int32),
                           "start_ns": s_start, "end_ns": s_start + 40_000}),
        "nvml": pa.table({"device": np.zeros(2 * ts.size, np.int32), "ts_ns": np.concatenate([ts, ts]),
                          "metric": pa.array(["gpu_util_pct"] * ts.size + ["sm_clock_mhz"] * ts.size),
                          "value": np.concatenate([rng.uniform(40, 100, ts.size), rng.uniform(1400, 1980, ts.size)]),
                          "source": pa.array(["poll"] * (2 * ts.size))}),
    }
    data = {k: tables.conform(k, v) for k, v in data.items()}
    obs = ("kernels", "runtime_api", "spans", "nvml")
    manifest = {
        "incident_id": incident_id, "reason": "manual", "producer": "synthetic",
        "clock": {"host": "monotonic", "unix_minus_host_ns": None},
        "sources": {**{n: source("observed") for n in obs},
                    "memcpy": source("not_observed", "not in this synthetic case"),
                    "sched": source("not_observed", "not in this synthetic case"),
                    "collectives": source("not_observed", "single process")},
    }
    write_incident(path, manifest, data)
    return path


def _preflight(plan: dict, plan_digest: str, block: str, *, differences=()) -> dict:
    rec = {"schema_version": 1, "kind": "preflight", "block": block, "plan_digest": plan_digest,
           "incident_id": plan["incident_id"], "experiment": plan["experiment"], "node": "node-0",
           "checked_unix_ns": 1, "status": "new_experiment" if differences else "pass",
           "differences": [dict(d) for d in differences], "missing": [], "environment": {}}
    records.validate(rec, "preflight")
    return rec


def results_for(incident_dir: Path, results_dir: Path, *, trials: bool = True, effect: float = -0.08,
                diagnose: bool = True, blocks: int = 6) -> dict[str, Path]:
    """Snapshot, diagnosis (diagnose=True) and (trials=True) plan, preflights, executions and comparison."""
    incident_id = records.read_record(incident_dir / "manifest.json", "incident_manifest")["incident_id"]
    base = results_dir / incident_id
    base.mkdir(parents=True, exist_ok=True)
    paths = {"snapshot": base / "snapshot.json", "diagnosis": base / "diagnosis.json",
             "plan": base / "plan.json", "comparison": base / "comparison.json"}
    ingest(incident_dir, results_dir, paths["snapshot"])
    if diagnose:
        diagnose_snapshot_file(paths["snapshot"], results_dir, paths["diagnosis"])
    if not trials:
        return paths
    plan = CB.plan(CB.design(blocks=blocks, runs_per_arm=2, control_runs=2, warmup_runs=1))
    plan["incident_id"] = incident_id
    plan["experiment"] = "new-driver"
    records.write_record(paths["plan"], plan, "plan")
    pd = records.digest_of(plan)
    ex, digests, _ = CB.executions(plan, CB.lognormal_values(3, effect=effect))
    if "b002" in ex:
        retried = ex["b002"]["runs"][1]  # its first attempt failed, the retry succeeded
        ex["b002"]["runs"].insert(1, CB.run(retried["index"], retried["arm"], None, status="failed"))
        retried["attempt"] = 1
    for b, e in ex.items():
        e["plan_digest"] = pd
        pf = _preflight(plan, pd, b, differences=[{"field": "driver_version", "planned": "580.1", "observed": "580.2"}] if b == "b001" else ())
        records.write_record(base / "preflight" / f"{b}.json", pf, "preflight")
        records.write_record(base / "execution" / f"{b}.json", e, "execution")
    digests = {b: records.digest_of(e) for b, e in ex.items()}
    records.write_record(paths["comparison"], compare.compare(*CB.typed_records(plan, ex), digests, pd).to_json(), "comparison")
    return paths


FIXTURES = Path(__file__).resolve().parent / "fixtures"
H200_PIPELINES = ("demo-ab", "demo-aa")
"""tests/fixtures/h200/<name>/: the records of the demo pipeline run with Snakemake on an H200."""
H200_CAPTURES = ("host-gap", "blocking-sync", "starved-queue")
"""tests/fixtures/capture/<name>/: incidents recorded on an H200 with CUPTI (kernels, API calls)."""


def h200_pipeline_records(name: str, results_dir: Path) -> dict[str, Path] | None:
    """The fixture's records under results_dir/demo/, its incident's tables in results_dir's store."""
    src = FIXTURES / "h200" / name
    incident = FIXTURES / "h200" / "incidents" / "demo"
    if not (src / "snapshot.json").is_file() or not (incident / "manifest.json").is_file():
        return None
    base = results_dir / "demo"
    shutil.copytree(src, base)
    cas = CAS(results_dir)
    manifest = records.read_record(incident / "manifest.json", "incident_manifest")
    for entry in manifest["tables"].values():
        cas.put_file(incident / entry["path"])
    cas.put_file(incident / "manifest.json")
    return {k: base / f"{k}.json" for k in ("snapshot", "diagnosis", "plan", "comparison")}


def h200_capture(name: str, incidents_dir: Path, folder: str = "capture") -> Path | None:
    """A copy of a recorded H200 incident (tests/fixtures/<folder>/<name>) without its artifacts
    (they are paths on the GPU machine, which snapshot would rightly refuse as missing); tables
    and sources unchanged."""
    src = FIXTURES / folder / name
    if not (src / "manifest.json").is_file():
        return None
    dst = incidents_dir / Path(name).name
    shutil.copytree(src, dst)
    manifest = records.read_record(dst / "manifest.json", "incident_manifest")
    manifest["artifacts"] = []
    records.write_record(dst / "manifest.json", manifest, "incident_manifest")
    return dst


def h200x2_collectives(incidents_dir: Path) -> Path | None:
    """The two-rank NCCL flight-recorder dumps imported into an incident (collectives only)."""
    dumps = sorted((FIXTURES / "h200x2_collectives").glob("nccl_trace_json_rank_*.json"))
    if not dumps:
        return None
    from workflow_lib.importers.torch_fr import import_torch_fr

    return Path(import_torch_fr([str(d) for d in dumps], incident_id="fr-two-ranks", incidents_dir=str(incidents_dir)))


def with_attribution(diagnosis: dict, comparison: dict | None) -> tuple[dict, dict | None]:
    """Copies of the records with the delay-attribution and explained-change fields of the
    diag/compare contract (COMMON.md), filled from the records' own numbers the simplest way:
    typical = the rank's median wall, each attributed finding's explained time as its cause.
    For rendering tests of records written after those fields land; not validated here (the
    schemas in this branch predate them)."""
    import copy

    d = copy.deepcopy(diagnosis)
    walls: dict[int, list[int]] = {}
    for st in d["steps"]:
        walls.setdefault(-1 if st["rank"] is None else st["rank"], []).append(st["wall_ns"])
    slow = []
    for st in d["steps"]:
        typical = int(np.median(walls[-1 if st["rank"] is None else st["rank"]]))
        excess = st["wall_ns"] - typical
        by_cause = {f["check"]: f["explains_ns"] for f in st["findings"] if f["verdict"] == "attributed" and f["explains_ns"] > 0}
        left = max(excess, 0)
        for k in sorted(by_cause, key=lambda k: -by_cause[k]):  # credited in order, never beyond the excess
            by_cause[k] = min(by_cause[k], left)
            left -= by_cause[k]
        by_cause = {k: v for k, v in by_cause.items() if v > 0}
        st["excess"] = {"typical_ns": typical, "excess_ns": excess, "by_cause": by_cause, "unexplained_ns": left}
        for f in st["findings"]:
            # its credited part of the excess (<= 1, as the schema and the findings table hold it)
            f["share_of_excess"] = (by_cause.get(f["check"], 0) / excess) if excess > 0 and f["verdict"] == "attributed" else None
        if typical and st["wall_ns"] >= 1.5 * typical:
            slow.append({"rank": st["rank"], "step_id": st["step_id"], "wall_ns": st["wall_ns"], "typical_ns": typical,
                         "excess_ns": excess, "by_cause": by_cause, "unexplained_ns": left,
                         "grew": {"host_spans_ns": {"dataloader_next/worker~0": excess // 2}}})
    d["summary"]["slow_steps"] = sorted(slow, key=lambda s: -s["excess_ns"])[:20]
    if comparison is None:
        return d, None
    typed_in = not isinstance(comparison, dict)  # the typed Comparison the report reads
    c = comparison.to_json() if typed_in else copy.deepcopy(comparison)
    c["components"] = [  # compare's shape: a wall headline, overlapping measures, then the partitions
        {"name": "wall", "group": "wall", "label": "wall", "delta_ns_per_step": -1_500_000, "interval_ns": [-1_600_000, -1_400_000],
         "floor_ns": 90_000, "clears_floor": True, "share_of_change": 1.0, "status": "resolved"},
        {"name": "gpu_busy", "group": "measure", "label": "GPU busy", "delta_ns_per_step": -20_000, "interval_ns": [-40_000, 0],
         "floor_ns": 90_000, "clears_floor": False, "share_of_change": 0.01, "status": "resolved"},
        {"name": "check:input_starvation", "group": "attribution", "delta_ns_per_step": -1_230_000, "interval_ns": [-1_290_000, -1_180_000],
         "floor_ns": 90_000, "clears_floor": True, "share_of_change": 0.81, "status": "resolved"},
        {"name": "check:sync_stall", "group": "attribution", "delta_ns_per_step": -10_000, "interval_ns": [-60_000, 40_000],
         "floor_ns": 90_000, "clears_floor": False, "share_of_change": 0.01, "status": "unresolved"},
    ]
    labels = {"check:input_starvation": "input starvation", "check:sync_stall": "sync stall"}
    for comp in c["components"]:  # the fields the schema requires of every component
        comp.setdefault("label", labels.get(comp["name"], comp["name"]))
        comp.setdefault("reason", None)
        comp.setdefault("baseline_ns_per_step", 10_000_000)
    c["sentence"] = "faster by 7.9% [6.4, 9.6]: input wait −1.23 ms/step [−1.29, −1.18]; sync −0.01 ms/step (within its floor)"
    if typed_in:
        from workflow_lib.core import typed

        return d, typed.of_json(type(comparison), c)
    return d, c


def cold_loader_incident(path: Path, incident_id: str = "cold-loader", steps: int = 12) -> Path:
    """A trainer starved by its loader (each 10 ms step waits 6 ms in dataloader.next with the
    GPU idle) whose first step is cold (1.6 s: context, lazy init, worker start; 5 ms inside
    cudaMalloc), with a pageable HtoD batch copy in steps 4 and 8 (2 ms, GPU idle)."""
    rows: dict[str, list] = {k: [] for k in ("steps", "kernels", "memcpy", "runtime_api", "spans", "clock_sync")}
    t, corr = 0, 1
    for i in range(steps):
        wall = 1600 * MS if i == 0 else 10 * MS + (2 * MS if i in (4, 8) else 0)
        rows["steps"].append(step(i, t, t + wall))
        rows["spans"].append(span("dataloader.next", t, t + 6 * MS, depth=1))
        if i == 0:
            for k in range(20):
                a = t + 6 * MS + k * 60 * MS
                rows["runtime_api"].append(api(a, a + 250_000, name="cudaMalloc"))
        k0 = t + wall - 4 * MS
        if i in (4, 8):
            c0 = t + 6 * MS
            rows["runtime_api"].append(api(c0, c0 + 2 * MS, name="cudaMemcpyAsync", corr=corr))
            rows["memcpy"].append(memcpy(c0 + 5_000, c0 + 2 * MS, kind="HtoD", corr=corr, nbytes=8 << 20,
                                         src_kind="pageable", dst_kind="device", is_async=True))
            corr += 1
        rows["runtime_api"].append(api(k0 - 10_000, k0 - 5_000, corr=corr))
        rows["kernels"].append(kernel(k0, k0 + 4 * MS, corr=corr))
        corr += 1
        t += wall
    rows["clock_sync"].append(clock(0, 1_000))
    make_incident(incident_id=incident_id, write_to=path, **rows)
    return path
