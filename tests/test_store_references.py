"""`stallcase verify` walks every object every record references, and a store that lost or
corrupted an object heals on a plain rerun (issue 38).

A results tree is built from the real stages (ingest, plan, preflight) into the layout the
workflow writes (results/<incident>/snapshot.json, runs/<run>/plan.json, execution/, comparison).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from workflow_lib.core import layout, records
from workflow_lib.core.cas import CAS
from workflow_lib.plan import build as P
from workflow_lib.snapshot import build as snapshot

from incident_factory import make_incident
from test_trials_runner import DESIGN

ROOT = Path(__file__).resolve().parent.parent


def _tree(tmp_path: Path) -> tuple[Path, dict, dict]:
    results = tmp_path / "results"
    inc = make_incident(tmp_path)
    snap_path = Path(layout.snapshot(str(results), "inc1"))
    snap = snapshot.ingest(inc, results, snap_path)
    plan = P.build_plan(snap, records.digest_of(snap), results, design=DESIGN, candidate="baseline").to_json()
    records.write_record(layout.plan(str(results), "inc1", "aa-1"), plan, "plan")
    return results, snap, plan


def _verify(results: Path, *extra) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "workflow_lib.cli", "verify", str(results), *extra], env=env,
                          capture_output=True, text=True, timeout=120)


def test_verify_catches_a_deleted_source_object_the_plan_needs(tmp_path):
    results, snap, plan = _tree(tmp_path)
    assert _verify(results).returncode == 0
    source = plan["arms"]["baseline"]["sources"][0]["digest"]
    CAS(results).path_for(source).unlink()
    got = _verify(results)
    assert got.returncode == 2, got.stdout + got.stderr
    assert source in got.stdout and "plan.json" in got.stdout and "snapshot.json" in got.stdout, got.stdout


def test_verify_catches_a_comparison_without_its_execution_records(tmp_path):
    results, snap, plan = _tree(tmp_path)
    run = Path(layout.run_dir(str(results), "inc1", "aa-1"))
    fake = {"schema_version": 1, "kind": "execution", "block": "b000", "plan_digest": records.digest_of(plan),
            "preflight_digest": "0" * 64, "node": "n", "started_unix_ns": 1, "ended_unix_ns": 2, "status": "complete",
            "runs": [], "notes": []}
    records.write_record(run / "execution" / "b000.json", fake, "execution")
    comparison = {"kind": "comparison", "plan_digest": records.digest_of(plan),
                  "execution_digests": {"b000": records.digest_of(records.read_record(run / "execution" / "b000.json", "execution"))}}
    (run / "comparison.json").write_text(json.dumps(comparison))  # only the fields verify reads: no schema check here
    from workflow_lib.snapshot.verify import Report, check_comparison

    report = Report()
    check_comparison(run / "comparison.json", comparison, report)
    assert report.corrupt == []
    (run / "execution" / "b000.json").unlink()
    check_comparison(run / "comparison.json", comparison, report)
    assert len(report.corrupt) == 1 and "b000" in report.corrupt[0][1] and "execution" in report.corrupt[0][1]


def test_repair_removes_what_nothing_references_and_reports_what_it_cannot_repair(tmp_path):
    results, snap, plan = _tree(tmp_path)
    stray = CAS(results).put_bytes(b"stored by a stage that was then refused")
    got = _verify(results, "--repair")
    assert got.returncode == 0 and f"removed  {CAS(results).path_for(stray)}" in got.stdout, got.stdout
    assert not CAS(results).has(stray)
    table = next(iter(snap["tables"].values()))["digest"]
    path = CAS(results).path_for(table)
    path.write_bytes(b"flipped" + path.read_bytes()[7:])
    got = _verify(results, "--repair")
    # the snapshot can be stored again from its incident: the object goes, the record is removed
    assert "repaired" in got.stdout and not path.exists(), got.stdout
    assert not Path(layout.snapshot(str(results), "inc1")).exists()  # a plain rerun ingests the incident again


def test_a_corrupt_object_a_stage_needs_marks_the_record_that_stored_it_out_of_date(tmp_path):
    from workflow_lib.core import rulelog
    from workflow_lib.diagnose import diagnose_snapshot_file

    results, snap, plan = _tree(tmp_path)
    snap_path = Path(layout.snapshot(str(results), "inc1"))
    table = next(iter(snap["tables"].values()))["digest"]
    obj = CAS(results).path_for(table)
    obj.write_bytes(b"\0" + obj.read_bytes()[1:])
    log = tmp_path / "logs" / "diagnose.log"
    try:
        rulelog.logged(log, diagnose_snapshot_file, str(snap_path), str(results), str(results / "inc1" / "diagnosis.json"))
    except Exception:  # noqa: BLE001 - the stage fails; what it leaves behind is the test
        pass
    assert not obj.exists()  # a corrupt object is never used again: removed
    assert not snap_path.exists()  # out of date: Snakemake reruns the snapshot stage
    line = log.read_text().splitlines()[-1]
    assert "out of date" in line and "rerun" in line, line
