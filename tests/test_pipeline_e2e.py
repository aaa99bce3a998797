"""The demo pipeline end to end through real Snakemake (small counts), plus -n and --lint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.core import records
from workflow_lib.core.cas import CAS

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
STAGES = ["capture_demo", "snapshot", "collectives", "diagnose", "plan", "preflight", "trials", "compare", "report"]


def smk(*args, cwd=ROOT, timeout=600):
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def demo_run(demo_pipeline):
    return demo_pipeline.demo, demo_pipeline.results


@pytest.mark.slow
def test_every_record_is_written_and_valid(demo_run):
    d, store = demo_run
    kinds = {"snapshot.json": "snapshot", "diagnosis.json": "diagnosis", "plan.json": "plan", "comparison.json": "comparison"}
    recs = {name: records.read_record(d / name, kind) for name, kind in kinds.items()}
    blocks = sorted(recs["plan.json"]["schedule"])
    assert len(blocks) == 6
    for b in blocks:
        pre = records.read_record(d / "preflight" / f"{b}.json", "preflight")
        ex = records.read_record(d / "execution" / f"{b}.json", "execution")
        assert pre["status"] == "pass" and ex["preflight_digest"] == records.digest_of(pre)
        assert ex["plan_digest"] == records.digest_of(recs["plan.json"])
        assert [r["arm"] for r in ex["runs"]] == [e["arm"] for e in recs["plan.json"]["schedule"][b]]
    cmp_ = recs["comparison.json"]
    assert cmp_["plan_digest"] == records.digest_of(recs["plan.json"])
    assert sorted(cmp_["execution_digests"]) == blocks
    assert cmp_["verdict"] in ("faster", "slower", "no_detectable_change", "inconclusive")
    assert recs["plan.json"]["snapshot_digest"] == records.digest_of(recs["snapshot.json"])
    # the plan is stored in the CAS under its own digest, and the store is sound
    cas = CAS(store)
    assert cas.get_bytes(records.digest_of(recs["plan.json"])) == records.canonical_bytes(recs["plan.json"])
    assert cas.verify() == []
    html = d / "report.html"
    assert html.is_file() and html.stat().st_size > 1000
    # the diagnosis' steps are in the two tables the diagnose rule declares beside its record
    from workflow_lib.diagnose import load_diagnosis, table_paths

    assert all(p.is_file() for p in table_paths(d / "diagnosis.json").values())
    diag = load_diagnosis(d / "diagnosis.json")
    assert recs["diagnosis.json"]["schema_version"] == 4 and "steps" not in recs["diagnosis.json"]
    assert diag.n_steps == recs["diagnosis.json"]["summary"]["steps"] > 0


@pytest.mark.slow
def test_dry_run_lists_every_stage_as_a_rule(tmp_path):
    r = smk("-n", "--config", "incident=demo", f"results_dir={tmp_path}/r", f"incidents_dir={tmp_path}/i")
    assert r.returncode == 0, r.stderr[-2000:]
    for stage in STAGES:
        assert f"rule {stage}:" in r.stdout or f"localrule {stage}:" in r.stdout, stage


@pytest.mark.slow
def test_lint_reports_no_error():
    r = smk("--lint")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.slow
def test_bad_config_is_refused_before_any_job(tmp_path):
    r = smk("-n", "--config", "incident=demo", "experiment=../escape", f"results_dir={tmp_path}/r")
    assert r.returncode != 0
    assert "experiment" in (r.stdout + r.stderr)


@pytest.mark.slow
def test_demo_verdict_is_a_real_speedup_at_equal_work(demo_run):
    # The candidate feeds the queue faster; every step still takes --min-ready items, so a
    # faster step is faster work, not less of it.
    d, _ = demo_run
    cmp_ = records.read_record(d / "comparison.json", "comparison")
    assert cmp_["verdict"] == "faster", cmp_["reasons"]
    assert not any("work per step" in r for r in cmp_["reasons"])
    work = {(r["arm"], r["work"]["items_per_step"]) for b in sorted((d / "execution").glob("b*.json"))
            for r in records.read_record(b, "execution")["runs"] if r["status"] == "ok"}
    assert {w for _, w in work} == {4.0}, work
