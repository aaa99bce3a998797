"""The workflow's diagnose rule validates the diagnosis once, where it writes it (issue 27: the
stage validated it, then records.write_record validated it again)."""

from __future__ import annotations

from workflow_lib import diagnose
from workflow_lib.core import records


def test_the_rule_entry_validates_the_diagnosis_once(demo_pipeline, tmp_path, monkeypatch):
    seen = []
    real = records.validate

    def counting(record, kind, **kw):
        seen.append(kind)
        return real(record, kind, **kw)

    monkeypatch.setattr(records, "validate", counting)
    out = tmp_path / "diagnosis.json"
    diagnose.diagnose_snapshot_file(demo_pipeline.demo / "snapshot.json", demo_pipeline.results, out)
    assert seen.count("diagnosis") == 1
    assert records.read_record(out, "diagnosis")["incident_id"] == "demo"
