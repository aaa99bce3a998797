"""A synthetic diagnosis of n steps (1M for issue 26's report target), built column-wise.

    million_step_case(root, n_steps=1_000_000) -> {"snapshot", "diagnosis", "store"} paths

The incident holds one rank's steps table only (10 ms steps; every other source not observed);
its diagnosis is written as the vectorized diagnosis writes it: the two tables made directly
from step_tables.STEPS_SCHEMA / FINDINGS_SCHEMA with NumPy (14 checks per step, evidence kept
for the 20 slow steps only), and a summary record whose totals are the tables' own sums.
Realistic shape: ~10 ms steps with 3% jitter, GPU work ~60% of a step, host submission ~8%,
short sync stalls, one or two listed GPU idle gaps per step, the collectives and scheduler
checks unresolved for want of their sources, and 20 slow steps (3x typical) starved by input.
Used by tests/test_report_browser.py and benchmarks/report_million_steps.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from workflow_lib.core import records, tables
from workflow_lib.core.incident import source, write_incident
from workflow_lib.diagnose import Diagnosis, write_diagnosis
from workflow_lib.diagnose import step_tables as T
from workflow_lib.diagnose.checks import NAMES
from workflow_lib.diagnose.types import DiagnoseOptions
from workflow_lib.snapshot.build import ingest

MS = 1_000_000
SLOW = 20
WARM = 5  # the first steps: no typical reference (excess null), as excess.attach leaves them
MISSING = {
    "cpu_contention": ["scheduler samples (sched not observed)"],
    "collective_wait": ["other ranks' traces: a collective wait is only attributable by comparing arrival across ranks"],
    "clock_throttle": ["NVML SM clock samples (nvml not observed)"],
}
ATTRIBUTED = ("gpu_work", "host_submission", "sync_stall", "input_starvation")


def _incident(path: Path, start: np.ndarray, end: np.ndarray, incident_id: str) -> Path:
    n = start.size
    steps = pa.table({"step_id": np.arange(n, dtype=np.int64), "thread_id": np.ones(n, np.int64), "start_ns": start,
                      "end_ns": end, "rank": pa.nulls(n, pa.int32())})
    manifest = {"incident_id": incident_id, "reason": "manual", "producer": "synthetic",
                "clock": {"host": "monotonic", "unix_minus_host_ns": None},
                "sources": {"host": source("observed"),
                            **{s: source("not_observed", "not in this synthetic case")
                               for s in ("kernels", "runtime_api", "memcpy", "nvml", "sched")},
                            "collectives": source("not_observed", "single process")}}
    write_incident(path, manifest, {"steps": tables.conform("steps", steps)})
    return path


def _gaps_json(start: np.ndarray, wall: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray, list[str]]:
    two = rng.random(start.size) < 0.3
    g1 = (wall * 0.05).astype(np.int64)
    g2 = np.where(two, (wall * 0.02).astype(np.int64), 0)
    a1 = start + (wall * 0.1).astype(np.int64)
    a2 = start + (wall * 0.7).astype(np.int64)
    texts = [f'[{{"end_ns":{x + g},"length_ns":{g},"start_ns":{x}}}' + (f',{{"end_ns":{y + h},"length_ns":{h},"start_ns":{y}}}]' if h else "]")
             for x, g, y, h in zip(a1.tolist(), g1.tolist(), a2.tolist(), g2.tolist())]
    return 1 + two.astype(np.int64), g1 + g2, texts


def million_step_case(root: Path, n_steps: int = 1_000_000, *, seed: int = 0, incident_id: str = "million-steps") -> dict:
    rng = np.random.default_rng(seed)
    typical = 10 * MS
    wall = (typical * (1 + 0.03 * rng.standard_normal(n_steps))).astype(np.int64)
    slow = np.sort(rng.choice(np.arange(WARM, n_steps), SLOW, replace=False))
    wall[slow] = 3 * typical + rng.integers(0, MS, SLOW)
    start = np.concatenate(([0], np.cumsum(wall + 20_000)[:-1])).astype(np.int64) + 1_000 * MS
    end = start + wall
    results = root / "results"
    inc = _incident(root / "incidents" / incident_id, start, end, incident_id)
    base = results / incident_id
    base.mkdir(parents=True, exist_ok=True)
    snap = ingest(inc, results, base / "snapshot.json")

    # Attributed time per check (ns per step), disjoint by construction: they add up to explained.
    k = len(NAMES)
    explains = np.zeros((n_steps, k), np.int64)
    col = {c: i for i, c in enumerate(NAMES)}
    work = np.minimum(wall, typical)  # a slow step does a typical step's work, then waits
    explains[:, col["gpu_work"]] = (work * 0.6).astype(np.int64)
    explains[:, col["host_submission"]] = (work * 0.08).astype(np.int64)
    explains[:, col["sync_stall"]] = (work * 0.02).astype(np.int64)
    explains[slow, col["input_starvation"]] = wall[slow] - typical
    attributed = explains > 0
    verdict = np.where(attributed, "attributed", "not_applicable").astype(object)
    for c in MISSING:
        verdict[:, col[c]] = "unresolved"
    explained = explains.sum(axis=1)
    gaps_count, gaps_total, gaps_text = _gaps_json(start, wall, rng)
    excess_ns = wall - typical
    excess_text = [None] * WARM + [
        f'{{"by_cause":{{}},"excess_ns":{e},"typical_ns":{typical},"unexplained_ns":{max(e, 0)}}}' for e in excess_ns[WARM:].tolist()]
    for i in slow.tolist():  # the slow steps' excess is the input wait
        e = int(excess_ns[i])
        excess_text[i] = json.dumps({"by_cause": {"input_starvation": e}, "excess_ns": e, "typical_ns": typical, "unexplained_ns": 0},
                                    sort_keys=True, separators=(",", ":"))
    steps_tbl = pa.table({
        "step_id": np.arange(n_steps, dtype=np.int64), "rank": pa.nulls(n_steps, pa.int64()), "thread_id": np.ones(n_steps, np.int64),
        "start_ns": start, "end_ns": end, "wall_ns": wall,
        **{c: pa.nulls(n_steps, pa.int64()) for c in ("kernel_sum_ns", "busy_ns", "idle_ns", "host_api_ns", "host_sync_api_ns")},
        "overlap_factor": pa.nulls(n_steps, pa.float64()), "gaps_count": gaps_count, "gaps_total_ns": gaps_total,
        "gaps_longest_json": pa.array(gaps_text, pa.string()), "explained_ns": explained, "unexplained_ns": wall - explained,
        "excess_json": pa.array(excess_text, pa.string())}, schema=T.STEPS_SCHEMA)

    # Findings: step-major, each step's 14 checks in the record's order. Codes, not strings.
    verdict_flat = verdict.ravel()
    verdicts = list(dict.fromkeys(["not_applicable", "attributed", "unresolved"]))
    v_code = np.array([verdicts.index(v) for v in ("not_applicable", "attributed", "unresolved")], np.int8)
    v_idx = np.where(verdict_flat == "attributed", v_code[1], np.where(verdict_flat == "unresolved", v_code[2], v_code[0])).astype(np.int8)
    missing_texts = ["[]"] + [json.dumps(MISSING[c], separators=(",", ":"), ensure_ascii=False) for c in MISSING]
    m_idx = np.zeros((n_steps, k), np.int32)
    for j, c in enumerate(MISSING, 1):
        m_idx[:, col[c]] = j
    positive = excess_ns > 0
    positive[:WARM] = False
    share = np.where(positive[:, None], 0.0, np.nan) * np.ones((1, k))
    share[slow, col["input_starvation"]] = 1.0
    evidence = np.full(n_steps * k, None, object)
    for i in slow.tolist():  # full evidence for the slow steps only, as the vectorized path keeps it
        for c in NAMES:
            ev = {"wait_ns": int(explains[i, col[c]]), "wait_spans": {"dataloader.next": int(explains[i, col[c]])}} \
                if c == "input_starvation" else {"note": f"synthetic {c} evidence"}
            evidence[i * k + col[c]] = json.dumps(ev, sort_keys=True, separators=(",", ":"))
    findings_tbl = pa.Table.from_arrays([
        pa.array(np.repeat(np.arange(n_steps, dtype=np.int64), k)),
        pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(k, dtype=np.int8), n_steps)), pa.array(list(NAMES))),
        pa.DictionaryArray.from_arrays(pa.array(v_idx), pa.array(verdicts)),
        pa.array(explains.ravel()), pa.array(share.ravel(), mask=np.isnan(share.ravel())),
        pa.DictionaryArray.from_arrays(pa.array(m_idx.ravel()), pa.array(missing_texts)),
        pa.array(evidence, pa.string()),
        # at_json: no place recorded (the incident holds no spans or calls a finding could sit on)
        pa.nulls(n_steps * k, pa.string())], schema=T.FINDINGS_SCHEMA)

    by_check = {c: {"attributed_steps": int((verdict[:, col[c]] == "attributed").sum()),
                    "unresolved_steps": int((verdict[:, col[c]] == "unresolved").sum()),
                    "not_applicable_steps": int((verdict[:, col[c]] == "not_applicable").sum()),
                    "explains_ns": int(explains[:, col[c]].sum())} for c in NAMES}
    order = slow[np.argsort(-excess_ns[slow], kind="stable")]
    listed = T.steps_from_tables(steps_tbl, findings_tbl, order)
    slow_steps = [{"rank": None, "step_id": st["step_id"], "wall_ns": st["wall_ns"], "typical_ns": typical,
                   "excess_ns": st["excess"]["excess_ns"], "by_cause": st["excess"]["by_cause"], "unexplained_ns": 0,
                   "grew": {"kernels_ns": {}, "host_spans_ns": {"dataloader.next": st["excess"]["excess_ns"]}},
                   "findings": st["findings"]} for st in listed]
    manifest = records.read_record(inc / "manifest.json", "incident_manifest")
    body = {
        "schema_version": 2, "kind": "diagnosis", "incident_id": incident_id, "snapshot_digest": records.digest_of(snap),
        "options": DiagnoseOptions().as_record(),
        "sources": {n: {"status": s.get("status"), "reason": s.get("reason")} for n, s in sorted(manifest["sources"].items())},
        "checks": list(NAMES),
        "summary": {"steps": n_steps, "wall_ns": int(wall.sum()), "explained_ns": int(explained.sum()),
                    "unexplained_ns": int((wall - explained).sum()), "by_check": by_check,
                    "windows": [{"rank": None, "start_ns": int(start[0]), "end_ns": int(end[-1]), "wall_ns": int(end[-1] - start[0]),
                                 **{c: None for c in ("kernel_sum_ns", "busy_ns", "idle_ns", "host_api_ns", "host_sync_api_ns",
                                                      "overlap_factor")},
                                 "gaps": {"count": 0, "total_ns": 0, "longest": []}, "devices": []}],
                    "slow_steps": slow_steps},
        "next_experiments": [{"rank": 1, "check": "input_starvation", "candidate_change": "more DataLoader workers, pinned memory",
                              "recoverable_upper_bound_ns": by_check["input_starvation"]["explains_ns"], "steps": n_steps - WARM,
                              "risk": "low", "risk_note": "synthetic"}],
    }
    write_diagnosis(base / "diagnosis.json", Diagnosis(body, steps_tbl, findings_tbl))
    return {"snapshot": base / "snapshot.json", "diagnosis": base / "diagnosis.json", "store": results}
