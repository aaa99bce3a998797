"""diagnose_dir on an incident directory: digest, written record, errors; scheduler removal."""

import pytest

from tests.builders import api, clock, kernel, make_incident, sched, span, step
from workflow_lib.core import records
from workflow_lib.diagnose import diagnose_dir, load_diagnosis
from workflow_lib.core.errors import InputError
from workflow_lib.snapshot.build import snapshot_record

MS = 1_000_000


def _host_gap_rows(with_sched: bool):
    rows = dict(
        steps=[step(i, i * 10 * MS, (i + 1) * 10 * MS) for i in range(3)],
        kernels=[kernel(i * 10 * MS, i * 10 * MS + 2 * MS, corr=2 * i) for i in range(3)]
        + [kernel(i * 10 * MS + 7 * MS, (i + 1) * 10 * MS, corr=2 * i + 1) for i in range(3)],
        runtime_api=[api(i * 10 * MS, i * 10 * MS + 10_000, corr=2 * i) for i in range(3)]
        + [api(i * 10 * MS + 6_900_000, i * 10 * MS + 6_910_000, corr=2 * i + 1) for i in range(3)],
        spans=[span("optimizer", i * 10 * MS + MS, i * 10 * MS + 6_900_000) for i in range(3)],
        clock_sync=[clock(0, 1_000)],
    )
    if with_sched:
        rows["sched"] = [sched(t * MS // 2, cpu_time_ns=t * MS // 2, runqueue_wait_ns=0) for t in range(0, 62)]
    return rows


def test_digest_and_written_record(tmp_path):
    inc_dir = tmp_path / "inc"
    make_incident(write_to=inc_dir, **_host_gap_rows(True))
    out = tmp_path / "d.json"
    rec = diagnose_dir(inc_dir, out_path=out)
    # The digest of the snapshot record this directory has (not of manifest.json: that is its manifest_digest).
    snap = snapshot_record(inc_dir, records.read_record(inc_dir / "manifest.json", "incident_manifest"))
    assert rec["snapshot_digest"] == records.digest_of(snap) != snap["manifest_digest"]
    got = load_diagnosis(out)  # the record, and its steps as the tables beside it
    assert got.steps() == rec["steps"]
    assert {k: v for k, v in got.record.items() if k not in ("schema_version", "step_tables")} == \
        {k: v for k, v in rec.items() if k not in ("schema_version", "steps")}
    assert {f["verdict"] for s in rec["steps"] for f in s["findings"] if f["check"] == "host_submission"} == {"attributed"}


def test_removing_scheduler_evidence_leaves_only_the_host_state_open(tmp_path):
    # Issue 14: a gap with nothing queued while the host was in a user span is host work in
    # that span without scheduler evidence; only "on CPU or descheduled?" stays unresolved.
    make_incident(write_to=tmp_path / "without", **_host_gap_rows(False))
    rec = diagnose_dir(tmp_path / "without")
    findings = [f for s in rec["steps"] for f in s["findings"] if f["check"] == "host_submission"]
    assert {f["verdict"] for f in findings} == {"attributed"}
    assert all(f["evidence"]["examples"][0]["host_span"] == "optimizer" for f in findings)
    assert all(f["evidence"]["examples"][0]["host_state"] is None for f in findings)
    assert all(any("sched not observed" in m for m in f["evidence"]["host_state_missing"]) for f in findings)


def test_no_steps_is_one_line_error(tmp_path):
    make_incident(write_to=tmp_path / "empty", steps=[], kernels=[kernel(0, 10)])
    with pytest.raises(InputError, match="no steps to diagnose"):
        diagnose_dir(tmp_path / "empty")
    with pytest.raises(InputError, match="incident directory not found"):
        diagnose_dir(tmp_path / "missing")
