"""Store and outputs (issue 17, item 5) and the sidecar's pass-through (item 6)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.cas import CAS, hash_bytes
from workflow_lib.core.errors import StallcaseError
from workflow_lib.snapshot.verify import verify

from test_security_paths import make_incident  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _objects(root: Path) -> list[str]:
    return sorted(CAS(root).iter_digests())


def test_verify_refuses_a_symlinked_prefix_directory_instead_of_skipping_it(tmp_path):
    root = tmp_path / "results"
    cas = CAS(root)
    d = cas.put_bytes(b"good object")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bad = hash_bytes(b"x")
    (elsewhere / bad[2:]).write_bytes(b"corrupted")  # named like an object, content differs
    (cas.objects / bad[:2]).symlink_to(elsewhere)
    rep = verify(root)
    assert not rep.ok
    assert any("prefix directory is a symlink" in p for _, p in rep.corrupt)
    assert d in {x for x in _objects(root)}


def test_verify_refuses_a_symlinked_store(tmp_path):
    real = tmp_path / "real" / "blake3"
    real.mkdir(parents=True)
    (tmp_path / "results" / "cas").mkdir(parents=True)
    (tmp_path / "results" / "cas" / "blake3").symlink_to(real)
    rep = verify(tmp_path / "results")
    assert any("store directory is a symlink" in p for _, p in rep.corrupt)


def test_ingest_refused_for_a_prefix_path_that_is_a_file_leaves_no_objects(tmp_path):
    inc = make_incident(tmp_path / "incidents")
    results = tmp_path / "results"
    from workflow_lib.core.incident import read_incident
    m = read_incident(inc).manifest
    # The manifest's prefix directory is a file: the put would fail after the tables were stored.
    from workflow_lib.core.cas import hash_file
    digest = hash_file(inc / "manifest.json")
    (results / "cas" / "blake3").mkdir(parents=True)
    (results / "cas" / "blake3" / digest[:2]).write_bytes(b"in the way")
    assert m["tables"]
    with pytest.raises(StallcaseError, match="not a directory"):
        snapshot.ingest(inc, results, results / "inc1" / "snapshot.json")
    assert _objects(results) == []


def test_ingest_refused_for_a_snapshot_path_that_is_a_directory_leaves_no_objects(tmp_path):
    inc = make_incident(tmp_path / "incidents")
    results = tmp_path / "results"
    (results / "inc1" / "snapshot.json").mkdir(parents=True)
    with pytest.raises(StallcaseError, match="directory"):
        snapshot.ingest(inc, results, results / "inc1" / "snapshot.json")
    assert _objects(results) == []


def test_verify_repair_removes_unreferenced_objects_and_keeps_referenced(tmp_path):
    inc = make_incident(tmp_path / "incidents")
    results = tmp_path / "results"
    rec = snapshot.ingest(inc, results, results / "inc1" / "snapshot.json")
    orphan = CAS(results).put_bytes(b"stored by a stage that then failed")
    rep = verify(results)
    assert rep.ok and orphan in _objects(results)  # plain verify never deletes
    rep = verify(results, repair=True)
    assert rep.ok and [p for p, _ in rep.unreferenced] == [str(CAS(results).path_for(orphan))]
    left = set(_objects(results))
    assert orphan not in left
    assert rec["manifest_digest"] in left and all(e["digest"] in left for e in rec["tables"].values())
    assert verify(results).ok


# ---- the sidecar never blocks its child

def test_forward_keeps_copying_after_the_line_handler_fails():
    from workflow_lib.capture.sidecar import _forward
    src = io.BytesIO(b"".join(b"line %d\n" % i for i in range(10_000)))
    sink = io.BytesIO()
    errors = []

    def on_line(line):
        raise OverflowError("cannot convert float infinity to integer")

    _forward(src, sink, on_line, lambda exc: errors.append(exc) or True)
    assert sink.getvalue().count(b"\n") == 10_000
    assert len(errors) == 1  # recorded once; parsing stops, pass-through goes on


def test_forward_bounds_a_line_without_newline():
    from workflow_lib.capture.sidecar import MAX_LINE_BYTES, _forward
    seen = []
    src = io.BytesIO(b"x" * (3 * MAX_LINE_BYTES + 5))
    sink = io.BytesIO()
    _forward(src, sink, lambda line: seen.append(len(line)))
    assert max(seen) <= MAX_LINE_BYTES and len(sink.getvalue()) == 3 * MAX_LINE_BYTES + 5


CHILD = r"""
import sys
print("step 1 took " + "9" * 400 + " ms", flush=True)
print("step 2 took 1e999 ms", flush=True)
print("step \u00b2 took 5 ms", flush=True)
for i in range(100000):
    print("x" * 100)
print("step 3 took 5 ms", flush=True)
print("child done", file=sys.stderr)
"""


def test_record_passes_everything_through_a_400_digit_duration(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    proc = subprocess.run([sys.executable, "-m", "workflow_lib.cli", "record", "--incident", "r1", "--incidents-dir",
                           str(tmp_path / "incs"), "--trigger", "exit", "--step-pattern",
                           r"step (?P<step>\S+) took (?P<ms>\S+) ms", "--", sys.executable, str(tmp_path / "child.py")],
                          capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count(b"x" * 100) == 100_000 and b"step 3 took 5 ms" in proc.stdout
    assert b"child done" in proc.stderr
    import json
    m = json.loads((tmp_path / "incs" / "r1" / "manifest.json").read_text())
    errs = " ".join(m["recorder"]["errors"])
    assert "not a duration" in errs and "not a decimal integer" in errs


def test_record_that_cannot_write_its_incident_exits_non_zero_with_one_line(tmp_path):
    (tmp_path / "incs").write_text("a file, not a directory")
    proc = subprocess.run([sys.executable, "-m", "workflow_lib.cli", "record", "--incident", "r2", "--incidents-dir",
                           str(tmp_path / "incs"), "--trigger", "exit", "--", sys.executable, "-c", "print('hi')"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert proc.returncode == 2
    # The sidecar's one informational line (no --step-pattern: one step per run) comes first.
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("stallcase record: no --step-pattern")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "could not write the incident" in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout.strip() == "hi"
