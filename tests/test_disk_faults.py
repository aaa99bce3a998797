"""Disk full and read-only results: a clear error, and nothing that was complete is lost.

A chmod'ed directory does not stop root, so these tests mount a small tmpfs (ENOSPC
when full) and remount it read-only (EROFS). Mounting needs privileges: without them
each test is skipped with the reason. Both the recorder's snapshot path and the
pipeline's record and store writes are exercised.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.capture import Budget, FlightRecorder
from workflow_lib.snapshot.verify import verify

from incident_factory import make_incident

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _mount(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs at tmp_path/fs; yields (path, remount_ro)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = _mount(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)])
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs CAP_SYS_ADMIN): {r.stderr.strip()}")

    def remount_ro():
        rr = _mount(["mount", "-o", "remount,ro", str(mnt)])
        assert rr.returncode == 0, rr.stderr

    try:
        yield mnt, remount_ro
    finally:
        _mount(["umount", "-l", str(mnt)])


def fill(mnt: Path, leave_bytes: int) -> None:
    """Fill the file system until at most leave_bytes are free."""
    free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
    if free > leave_bytes:
        (mnt / "filler").write_bytes(b"\0" * (free - leave_bytes))


def tree_bytes(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file() and p.name != "filler"}


def cli(*args) -> subprocess.CompletedProcess:
    env = {**ENV, "STALLCASE_ALLOW_ROOTS": os.environ.get("STALLCASE_ALLOW_ROOTS", "")}  # the tests' declared root
    return subprocess.run([sys.executable, "-m", "workflow_lib.cli", *map(str, args)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def assert_one_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert any(f in lines[0] for f in fragments), lines[0]


def _recorded(incidents: Path, incident_id: str) -> FlightRecorder:
    rec = FlightRecorder(incident_id=incident_id, incidents_dir=str(incidents), sources=("host",),
                         budget=Budget(retained_bytes=1 << 20, window_ns=60 * 10**9))
    rec.start()
    for i in range(30):
        with rec.step(i):
            with rec.span("work"):
                time.sleep(0.0005)
    return rec


def test_pipeline_ingest_on_a_full_disk_is_one_error_and_keeps_what_was_complete(tmp_path, small_fs):
    mnt, _ = small_fs
    results = mnt / "results"
    first = make_incident(tmp_path / "a", "inc1")
    snapshot.ingest(first, results, results / "inc1" / "snapshot.json")
    before = tree_bytes(results)
    big = make_incident(tmp_path / "b", "inc2")
    (tmp_path / "b" / "data.bin").write_bytes(os.urandom(600_000))  # an input bigger than what is left
    from workflow_lib.core.cas import hash_file
    m = records.read_record(big / "manifest.json", "incident_manifest")
    for a in m["artifacts"]:
        if a["role"] == "input":
            a["digest"], a["size"] = hash_file(a["path"]), 600_000
    records.write_record(big / "manifest.json", m, "incident_manifest")
    fill(mnt, 300_000)
    proc = cli("ingest", big, "--results-dir", results)
    assert_one_error(proc, "No space left on device")
    assert tree_bytes(results) == before  # no partial object, no record, old ones intact
    assert not (results / "inc2" / "snapshot.json").exists()
    report = verify(results)
    assert report.ok and report.leftovers == []


def test_record_write_on_a_full_disk_keeps_the_old_record(tmp_path, small_fs):
    mnt, _ = small_fs
    path = mnt / "results" / "inc" / "snapshot.json"
    inc = make_incident(tmp_path)
    rec = snapshot.ingest(inc, mnt / "results", path)
    old = path.read_bytes()
    fill(mnt, 0)
    bigger = dict(rec, provenance={"note": "x" * 200_000})
    with pytest.raises(OSError) as ei:
        records.write_record(path, bigger, "snapshot")
    assert ei.value.errno == 28  # ENOSPC, surfaced to Snakemake as the rule's error
    assert path.read_bytes() == old
    assert verify(mnt / "results").ok and not list(path.parent.glob(".tmp-*"))


def test_recorder_snapshot_on_a_full_disk_fails_cleanly_and_keeps_earlier_incidents(tmp_path, small_fs):
    mnt, _ = small_fs
    incidents = mnt / "incidents"
    rec = _recorded(incidents, "run")
    first = rec.snapshot("manual")
    assert first is not None and (first / "manifest.json").exists()
    before = tree_bytes(first)
    fill(mnt, 0)
    assert rec.snapshot("manual") is None  # the workload goes on; the failure is counted
    rec.stop()
    assert rec.failed_snapshots == 1
    errors = rec.report()["errors"]
    assert any("No space left" in e for e in errors) and all("\n" not in e for e in errors)
    assert tree_bytes(first) == before
    results = tmp_path / "results"
    results.mkdir()
    report = verify(results, incidents_dir=incidents)
    assert report.ok, report.corrupt  # the failed one has no manifest: a leftover, not corruption


def test_read_only_results_directory(tmp_path, small_fs):
    mnt, remount_ro = small_fs
    results = mnt / "results"
    inc = make_incident(tmp_path)
    snapshot.ingest(inc, results, results / "inc1" / "snapshot.json")
    other = make_incident(tmp_path / "other", "inc2")
    (tmp_path / "other" / "src" / "work.py").write_text("print('different source')\n")
    from workflow_lib.core.cas import hash_file
    m = records.read_record(other / "manifest.json", "incident_manifest")
    for a in m["artifacts"]:
        if a["role"] == "source":
            a["digest"], a["size"] = hash_file(a["path"]), Path(a["path"]).stat().st_size
    records.write_record(other / "manifest.json", m, "incident_manifest")
    before = tree_bytes(results)
    remount_ro()
    proc = cli("ingest", other, "--results-dir", results)
    assert_one_error(proc, "Read-only file system")
    assert tree_bytes(results) == before
    assert cli("verify", results).returncode == 0  # reading a read-only tree works
    snap = records.read_record(results / "inc1" / "snapshot.json", "snapshot")
    with pytest.raises(OSError) as ei:  # the pipeline's record write, as a rule would do it
        records.write_record(results / "inc1" / "snapshot.json", snap, "snapshot")
    assert ei.value.errno == 30  # EROFS
    assert tree_bytes(results) == before


def test_recorder_snapshot_into_a_read_only_incidents_directory(tmp_path, small_fs):
    mnt, remount_ro = small_fs
    incidents = mnt / "incidents"
    rec = _recorded(incidents, "ro")
    first = rec.snapshot("manual")
    assert first is not None
    before = tree_bytes(incidents)
    remount_ro()
    assert rec.snapshot("manual") is None
    rec.stop()
    assert rec.failed_snapshots == 1 and any("Read-only file system" in e for e in rec.report()["errors"])
    assert tree_bytes(incidents) == before
