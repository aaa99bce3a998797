"""`snapshot_digest` has one meaning in every record (the digest of the incident's snapshot
record, records.digest_of), and `Incident.path` one (where the incident was read from).

Each record's snapshot_digest is checked against what its reader recomputes from the
snapshot.json it reads: the diagnosis of the rule (tables back from the store), of the CLI (an
incident directory never ingested), and the spooled one; the plan's in tests/test_pipeline_e2e.py.
"""

from __future__ import annotations

import pytest

from tests.builders import kernel, make_incident, step
from workflow_lib.core import layout, records
from workflow_lib.core.errors import InputError
from workflow_lib.core.incident import read_incident
from workflow_lib.diagnose import diagnose, diagnose_dir, diagnose_snapshot_file, diagnose_to_file
from workflow_lib.snapshot import build as snapshot

MS = 1_000_000


def _incident(root, incident_id="inc", steps=4):
    d = root / "incidents" / incident_id
    make_incident(write_to=d, incident_id=incident_id, steps=[step(i, i * 10 * MS, (i + 1) * 10 * MS) for i in range(steps)],
                  kernels=[kernel(i * 10 * MS, i * 10 * MS + (2 + i) * MS) for i in range(steps)])
    return d


@pytest.fixture()
def ingested(tmp_path):
    inc = _incident(tmp_path)
    results = tmp_path / "results"
    snap_path = layout.snapshot(str(results), "inc")
    snapshot.ingest(inc, results, snap_path)
    # What a reader of the results tree recomputes: the digest of the snapshot.json it reads.
    return inc, results, snap_path, records.digest_of(records.read_record(snap_path, "snapshot"))


def test_every_diagnosis_names_the_snapshot_its_reader_reads(ingested, tmp_path):
    inc, results, snap_path, want = ingested
    by_rule = diagnose_snapshot_file(snap_path, results, tmp_path / "rule.json")
    by_dir = diagnose_dir(inc, out_path=tmp_path / "dir.json")
    diagnose_to_file(inc, tmp_path / "spooled.json")
    for name in ("rule.json", "dir.json", "spooled.json"):
        assert records.read_record(tmp_path / name, "diagnosis")["snapshot_digest"] == want, name
    assert by_rule["snapshot_digest"] == by_dir["snapshot_digest"] == want


def test_the_digest_is_of_the_snapshot_record_not_of_the_manifest(ingested):
    inc, _, snap_path, want = ingested
    snap = records.read_record(snap_path, "snapshot")
    assert snapshot.snapshot_digest(inc, read_incident(inc).manifest) == want
    assert snap["manifest_digest"] != want  # the other digest has its own name
    # One more byte in the manifest is another snapshot: the digest follows the record.
    m = read_incident(inc).manifest
    assert snapshot.snapshot_digest(inc, dict(m, reason="another")) != want


def test_incident_path_is_where_it_was_read_from(ingested):
    inc, results, snap_path, _ = ingested
    assert read_incident(inc).path == inc
    loaded = snapshot.load_tables(records.read_record(snap_path, "snapshot"), results)
    assert str(loaded.path) == snap_path  # the record it was read back through, never the store root


def test_an_error_on_a_stored_incident_names_its_snapshot_record(tmp_path):
    inc = _incident(tmp_path, "empty", steps=0)
    results = tmp_path / "results"
    snap_path = layout.snapshot(str(results), "empty")
    snapshot.ingest(inc, results, snap_path)
    loaded = snapshot.load_tables(records.read_record(snap_path, "snapshot"), results)
    with pytest.raises(InputError, match="no steps to diagnose") as err:
        diagnose(loaded, incident_id="empty", snapshot_digest="0" * 64)
    assert err.value.oneline().startswith(f"{snap_path}:")
