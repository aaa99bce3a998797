"""The H200 own-workload run (examples/gpu/h200_own_workload.sh, 2026-12-01): its records
still read under today's schemas and give the same verdict when compared again. Its CPU
twin, run in CI, is tests/test_own_workload_e2e.py."""

from __future__ import annotations

from pathlib import Path

from workflow_lib import compare, records

D = Path(__file__).resolve().parent / "fixtures" / "h200" / "own-workload"


def test_h200_own_workload_records_reproduce_their_verdict():
    plan = records.read_record(D / "plan.json", "plan")
    stored = records.read_record(D / "comparison.json", "comparison")
    ex = {p.stem: records.read_record(p, "execution") for p in sorted((D / "execution").glob("*.json"))}
    again = compare.compare(plan, ex, {b: records.digest_of(e) for b, e in ex.items()}, records.digest_of(plan))
    assert again["verdict"] == stored["verdict"] == "faster"
    assert abs(again["estimate"]["ratio"] - stored["estimate"]["ratio"]) < 1e-12
    runs = [r for e in ex.values() for r in e["runs"]]
    assert len(runs) == 18 and all(r["status"] == "ok" and r["metric_source"] == "recorder_steps" for r in runs)
    assert {s["relpath"] for s in plan["arms"]["baseline"]["sources"]} == {"model.py", "train.py"}
    assert plan["arms"]["candidate"]["argv"][-2:] == ["--workers", "4"]
