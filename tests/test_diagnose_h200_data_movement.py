"""Data movement, cold start and compilation captured on the H200 (examples/gpu/h200_data_movement.py:
each cause injected at known steps, recorder and Kineto forms, tests/fixtures/h200/data-movement/
<case>-<form>/ with truth.json and provenance.json), scored by tests/data_movement_scoring.py:
every injected step's excess explained by the right cause, the cold first step warm-up and
only warm-up, 0 false attributions on normal steps. The CPU twin runs the same scoring on
synthetic incidents of the same shape (tests/data_movement_synthetic.py)."""

import json
from pathlib import Path

import pytest

from tests.data_movement_scoring import failures, score
from tests.data_movement_synthetic import CASES, incident
from workflow_lib.diagnose import DiagnoseOptions, diagnose, diagnose_dir

FIX = Path(__file__).parent / "fixtures" / "h200" / "data-movement"
CAPTURES = sorted(p for p in FIX.glob("*/") if (p / "truth.json").exists())
NOT_CAPTURED = pytest.param(None, marks=pytest.mark.skip(
    reason="no H200 captures under tests/fixtures/h200/data-movement yet (run examples/gpu/h200_data_movement.sh); "
           "CPU twin: test_cpu_twin_synthetic_incident"))


@pytest.mark.parametrize("fixture", CAPTURES or [NOT_CAPTURED], ids=lambda p: p.name if p else "none")
def test_h200_capture_explained_by_the_right_cause(fixture):
    truth = json.loads((fixture / "truth.json").read_text())
    prov = json.loads((fixture / "provenance.json").read_text())
    assert prov["gpu"] and prov["torch"] and prov["date_utc"] and prov["command"]
    assert failures(score(diagnose_dir(fixture / "incident"), truth)) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_twin_synthetic_incident(case):
    inc, truth = incident(case)
    rec = diagnose(inc, incident_id=case, snapshot_digest="0" * 64, options=DiagnoseOptions())
    sc = score(rec, truth)
    assert failures(sc) == []
    if truth["injected"]:
        assert any(r["scored"] for r in sc["injected"].values())
    # The warm-up is never what to try next, and the cold step never sets the typical step.
    assert "warm_up" not in sc["ranked"]
    assert all(s["excess"] is None or s["excess"]["typical_ns"] < 20_000_000 for s in rec["steps"])


def test_scoring_fails_a_wrong_attribution():
    """The scorer can fail: the pageable incident scored as if its copies had to be compilation."""
    inc, truth = incident("pageable")
    truth["accepted_causes"] = {"pageable_htod": ["compilation"]}
    rec = diagnose(inc, incident_id="x", snapshot_digest="0" * 64, options=DiagnoseOptions())
    assert any("right cause" in f for f in failures(score(rec, truth)))
