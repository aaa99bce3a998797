"""Fault injection: SIGKILL in the middle of every kind of write, then re-run and verify.

Each child (tests/fault_children.py) does a real stallcase write and pauses at a chosen
point after touching a marker; the test SIGKILLs it there. Afterwards: nothing that
claims to be complete is corrupt (`stallcase verify` exits 0), temp files are reported
as leftovers and removed by --clean-temp, and re-running the same command completes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workflow_lib.plan import build as P
from workflow_lib.preflight import check as PF
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.cas import CAS, hash_file
from workflow_lib.snapshot.verify import verify

from benchmarks import compare_builders as CB
from incident_factory import make_incident
from test_plan import DESIGN

ROOT = Path(__file__).resolve().parent.parent
CHILD = [sys.executable, str(ROOT / "tests" / "fault_children.py")]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def start(args: list[str]) -> subprocess.Popen:
    # Own session: the kill takes the child and anything it started, as a job kill would.
    return subprocess.Popen(CHILD + [str(a) for a in args], env=ENV, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def kill_when(proc: subprocess.Popen, ready, timeout_s: float = 30.0) -> None:
    """SIGKILL the child's process group once ready() is true; fail if it exits first."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"child exited ({proc.returncode}) before the fault point: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("child never reached the fault point")
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def finish(args: list[str]) -> str:
    proc = subprocess.run(CHILD + [str(a) for a in args], env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def cli_verify(root: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workflow_lib.cli", "verify", str(root), *map(str, extra)],
                          env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=120)


def assert_sound(root: Path, *extra) -> subprocess.CompletedProcess:
    proc = cli_verify(root, *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    return proc


def temps(top: Path) -> list[Path]:
    return [p for p in top.rglob(".tmp-*")]


def test_kill_during_cas_put_leaves_no_object_and_rerun_stores_it(tmp_path):
    src = tmp_path / "blob.bin"
    src.write_bytes(os.urandom(4 << 20))
    root = tmp_path / "results"
    marker = tmp_path / "paused"
    kill_when(start(["cas-put", src, root, "--pause-mid-copy", marker]), marker.exists)
    digest = hash_file(src)
    assert not CAS(root).has(digest)  # never linked into place
    left = temps(root)
    assert len(left) == 1 and 0 < left[0].stat().st_size < src.stat().st_size  # killed mid-copy
    out = assert_sound(root).stdout
    assert "leftover" in out and "0 corrupt" in out
    assert finish(["cas-put", src, root]).strip() == digest
    assert CAS(root).get_bytes(digest) == src.read_bytes()
    assert "1 leftovers (1 removed)" in assert_sound(root, "--clean-temp").stdout
    assert temps(root) == [] and "0 leftovers" in assert_sound(root).stdout


def test_kill_at_random_points_of_an_unpatched_put(tmp_path):
    """No pause: kills land wherever they land; the store is sound every time."""
    src = tmp_path / "blob.bin"
    src.write_bytes(os.urandom(16 << 20))
    root = tmp_path / "results"
    root.mkdir()
    for delay_s in (0.05, 0.1, 0.2, 0.3):
        proc = start(["cas-put", src, root])
        time.sleep(delay_s)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert verify(root).ok
    assert finish(["cas-put", src, root]).strip() == hash_file(src)
    assert verify(root, clean_temp=True).ok and temps(root) == []


@pytest.mark.parametrize("point", ["--pause-before-manifest", "--pause-mid-table"])
def test_kill_during_snapshot_write_leaves_an_incomplete_incident_nothing_ingests(tmp_path, point):
    incidents, results = tmp_path / "incidents", tmp_path / "results"
    results.mkdir()
    marker = tmp_path / "paused"
    kill_when(start(["snapshot", incidents, "inc", point, marker]), marker.exists)
    inc = incidents / "inc"
    assert inc.is_dir() and not (inc / "manifest.json").exists()
    proc = assert_sound(results, "--incidents-dir", incidents)
    assert "without manifest.json" in proc.stdout
    # Nothing ingests a half-written incident: one clean error, no record, no objects.
    ing = subprocess.run([sys.executable, "-m", "workflow_lib.cli", "ingest", str(inc), "--results-dir", str(results)],
                         env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ing.returncode == 2 and ing.stderr.startswith("error: ") and len(ing.stderr.splitlines()) == 1
    assert "record not found" in ing.stderr and not (results / "cas").exists()
    # Re-running the same recording completes in the same directory.
    assert Path(finish(["snapshot", incidents, "inc"]).strip()) == inc
    snap = snapshot.ingest(inc, results, results / "inc" / "snapshot.json")
    assert snap["tables"]["steps"]["rows"] == 20
    assert_sound(results, "--incidents-dir", incidents, "--clean-temp")
    assert temps(incidents) == [] and temps(results) == []


def _trial_setup(tmp_path: Path):
    inc = make_incident(tmp_path, delay_ms=20.0)
    results = tmp_path / "results"
    snap = snapshot.ingest(inc, results, results / "inc1" / "snapshot.json")
    plan = P.build_plan(snap, records.digest_of(snap), results, design=DESIGN, candidate="baseline")
    records.write_record(results / "inc1" / "plan.json", plan.to_json(), "plan")
    pd = records.digest_of(plan)
    pre = PF.preflight(plan, pd, "b000", results, results_dir=results / "inc1")
    assert pre["status"] == "pass"
    records.write_record(results / "inc1" / "preflight" / "b000.json", pre, "preflight")
    return results


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_kill_during_a_blocks_runs_then_rerun_completes(tmp_path):
    results = _trial_setup(tmp_path)
    r = results / "inc1"
    out = r / "execution" / "b000.json"
    args = ["trials", r / "plan.json", r / "preflight" / "b000.json", "b000", results, r / "work" / "b000", out, r / "logs" / "trials-b000.log"]
    proc = start(args)
    seen: set[int] = set()

    def second_run_started() -> bool:
        seen.update(_children(proc.pid))
        return len(seen) >= 2  # the workload of run 2 is running: killed mid-block

    kill_when(proc, second_run_started)
    assert not out.exists()
    assert_sound(results)
    finish(args)
    rec = records.read_record(out, "execution")
    planned = records.read_record(r / "plan.json", "plan")["schedule"]["b000"]
    assert rec["status"] == "complete" and {x["index"] for x in rec["runs"]} == {e["index"] for e in planned}
    assert_sound(results)


def _compare_setup(tmp_path: Path):
    des = CB.design(blocks=6, runs_per_arm=2, control_runs=2)
    plan = CB.plan(des)
    r = tmp_path / "results" / "inc-1"
    records.write_record(r / "plan.json", plan, "plan")
    pd = records.digest_of(plan)
    execs = []
    for block, sched in plan["schedule"].items():
        runs = [CB.run(e["index"], e["arm"], 1e6 * (1.1 if e["arm"] == "B" else 1.0)) for e in sched]
        rec = {"schema_version": 1, "kind": "execution", "block": block, "plan_digest": pd, "preflight_digest": CB.DIGEST0,
               "node": "n", "started_unix_ns": 1, "ended_unix_ns": 2, "status": "complete", "runs": runs, "notes": []}
        path = r / "execution" / f"{block}.json"
        records.write_record(path, rec, "execution")
        execs.append(path)
    return r, execs


def test_kill_during_compare_leaves_no_record_and_rerun_writes_it(tmp_path):
    r, execs = _compare_setup(tmp_path)
    out = r / "comparison.json"
    marker = tmp_path / "paused"
    kill_when(start(["compare", r / "plan.json", out, *execs, "--pause-before-rename", marker]), marker.exists)
    assert not out.exists() and len(temps(r)) == 1  # the complete-but-unrenamed temp file
    assert_sound(r.parent)
    finish(["compare", r / "plan.json", out, *execs])
    rec = records.read_record(out, "comparison")
    assert rec["counts"]["valid_blocks"] == 6
    assert "(1 removed)" in assert_sound(r.parent, "--clean-temp").stdout


def test_kill_during_compare_over_an_existing_record_keeps_the_old_one(tmp_path):
    r, execs = _compare_setup(tmp_path)
    out = r / "comparison.json"
    finish(["compare", r / "plan.json", out, *execs])
    before = out.read_bytes()
    marker = tmp_path / "paused"
    kill_when(start(["compare", r / "plan.json", out, *execs, "--pause-before-rename", marker]), marker.exists)
    assert out.read_bytes() == before  # the complete old record, never half of the new one
    assert_sound(r.parent)


def test_verify_reports_corruption_and_fails(tmp_path):
    """The verification pass itself must be able to fail."""
    r, execs = _compare_setup(tmp_path)
    execs[0].write_text(execs[0].read_text()[:-30])
    proc = cli_verify(r.parent)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "not valid JSON" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
