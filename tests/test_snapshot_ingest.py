import os

import pytest

from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.cas import CAS
from workflow_lib.core.errors import InputError, MissingArtifact

from incident_factory import make_incident


def test_ingest_writes_valid_snapshot_and_stores_sources(tmp_path):
    inc = make_incident(tmp_path)
    out = tmp_path / "results" / "inc1" / "snapshot.json"
    rec = snapshot.ingest(inc, tmp_path / "results", out)
    assert records.read_record(out, "snapshot") == rec
    cas = CAS(tmp_path / "results")
    by_role = {a["role"]: a for a in rec["artifacts"]}
    assert cas.has(by_role["source"]["digest"]) and cas.has(by_role["input"]["digest"])
    assert not cas.has(by_role["library"]["digest"])  # environment: verified in place, not copied
    assert cas.has(rec["tables"]["steps"]["digest"]) and cas.has(rec["manifest_digest"])
    loaded = snapshot.load_tables(rec, tmp_path / "results")
    assert loaded.table("steps").num_rows == 2


def test_missing_artifacts_block_with_one_line_each_and_no_record(tmp_path):
    inc = make_incident(tmp_path)
    (tmp_path / "data.bin").unlink()
    (tmp_path / "libfake.so").write_bytes(b"changed")
    out = tmp_path / "results" / "inc1" / "snapshot.json"
    with pytest.raises(MissingArtifact) as ei:
        snapshot.ingest(inc, tmp_path / "results", out)
    lines = ei.value.oneline().splitlines()
    assert len(lines) == 2
    assert any(l.startswith("missing artifact: role=input path=") and "expected_digest=" in l for l in lines)
    assert any("role=library" in l for l in lines)
    assert not out.exists()


def test_source_found_in_store_after_original_deleted(tmp_path):
    inc = make_incident(tmp_path)
    snapshot.ingest(inc, tmp_path / "results", tmp_path / "s1.json")
    (tmp_path / "src" / "work.py").unlink()  # original gone, but the store has it
    rec = snapshot.ingest(inc, tmp_path / "results", tmp_path / "s2.json")
    assert any(a["role"] == "source" for a in rec["artifacts"])


def test_tampered_table_refused(tmp_path):
    inc = make_incident(tmp_path)
    t = inc / "tables" / "steps.parquet"
    data = bytearray(t.read_bytes())
    data[len(data) // 2] ^= 0xFF
    t.write_bytes(bytes(data))
    with pytest.raises(InputError, match="digest mismatch"):
        snapshot.ingest(inc, tmp_path / "results", tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()
