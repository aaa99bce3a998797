"""`stallcase diagnose` on an incident of flight-recorder dumps alone: a collectives-only diagnosis, not an error."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.collectives_helpers import make_incident
from benchmarks.fr_builders import hang_job
from workflow_lib import cli
from workflow_lib.importers.torch_fr import import_torch_fr
from workflow_lib.core.records import read_record

FIX = Path(__file__).parent / "fixtures" / "h200_fr_hang"


def test_dump_only_incident_diagnoses_who_hung_the_job(tmp_path, capsys):
    h = hang_job(16, "gpu_error", 11)
    inc = make_incident(tmp_path, "dumps", h.dumps)
    out = tmp_path / "diagnosis.json"
    assert cli.main(["diagnose", str(inc.path), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "--step-pattern" not in text
    assert f"hung on: 0|[" in text and f"seq {h.hang_seq} all_reduce: rank 11 (stuck_on_device)" in text
    rec = read_record(out, "diagnosis")
    assert rec["step_tables"]["steps"]["rows"] == 0 and rec["collectives"]["hung_on"]["culprit_ranks"] == [11]
    assert [(c["rank"], c["kind"]) for c in rec["collectives"]["culprits"]] == [(11, "stuck_on_device")]


def test_real_h200_hang_dump_diagnoses(tmp_path, capsys):
    f = tmp_path / "nccl_trace_rank_0"
    shutil.copy(FIX / "timeout_rank_0", f)
    inc = import_torch_fr([f], incident_id="h200", incidents_dir=tmp_path / "inc")
    out = tmp_path / "d.json"
    assert cli.main(["diagnose", str(inc), "-o", str(out)]) == 0
    assert "hung on: 0|[0] seq 6 all_reduce: no rank singled out" in capsys.readouterr().out
    assert read_record(out, "diagnosis")["collectives"]["pending"] == 1


def test_collectives_rule_record_is_what_the_diagnosis_reads(tmp_path, monkeypatch):
    from workflow_lib.core import records
    from workflow_lib.collectives import rule
    from workflow_lib.diagnose import diagnose_snapshot_file
    from workflow_lib.snapshot.build import ingest

    h = hang_job(16, "gil", 6)
    inc = make_incident(tmp_path, "pipe", h.dumps)
    res = tmp_path / "results"
    ingest(inc.path, res, res / "snapshot.json")
    coll = rule.run(res / "snapshot.json", res, res / "collectives.json")
    assert records.read_record(res / "collectives.json", "collectives")["hung_on"]["culprit_ranks"] == [6]
    # The diagnosis takes the written record as it is: no second analysis inside it.
    import workflow_lib.collectives.analyze as analyze_mod

    def refuse(*a, **k):
        raise AssertionError("analysed again")

    monkeypatch.setattr(analyze_mod, "analyze_collectives", refuse)
    d = diagnose_snapshot_file(res / "snapshot.json", res, res / "diagnosis.json", collectives_path=res / "collectives.json")
    assert d["collectives"]["hung_on"] == coll["hung_on"]


def test_a_version_1_collectives_record_is_refused_not_diagnosed_without_its_verdict(tmp_path):
    """Version 1 has no hung_on or culprits (records.NOT_UPGRADABLE): the diagnosis reads the
    record through records.upgrade, which names what to do, and writes nothing."""
    import pytest

    from workflow_lib.core import records
    from workflow_lib.core.errors import RecordError
    from workflow_lib.collectives import rule
    from workflow_lib.diagnose import diagnose_snapshot_file
    from workflow_lib.snapshot.build import ingest

    inc = make_incident(tmp_path, "old", hang_job(16, "gil", 6).dumps)
    res = tmp_path / "results"
    ingest(inc.path, res, res / "snapshot.json")
    rec = rule.run(res / "snapshot.json", res, res / "collectives.json")
    old = {k: v for k, v in rec.items() if k not in ("culprits", "hung_on", "culprit_order")}
    old["schema_version"] = 1
    for op in old["ops"]:
        for k in ("progress", "states", "counter_ranks"):
            op.pop(k, None)
    records.write_record(res / "collectives.json", old, "collectives")  # a valid version 1 record
    with pytest.raises(RecordError, match="re-run the collectives rule"):
        diagnose_snapshot_file(res / "snapshot.json", res, res / "diagnosis.json", collectives_path=res / "collectives.json")
    assert not (res / "diagnosis.json").exists()
