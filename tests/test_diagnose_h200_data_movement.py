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


def test_every_case_was_captured_in_both_forms():
    """The six causes of issue 25, each in recorder and Kineto form: a missing capture fails here."""
    assert {p.name for p in CAPTURES} == {f"{c}-{f}" for c in ("cold_start", "pageable", "item", "dtoh_pack", "recompile", "autotune")
                                          for f in ("recorder", "kineto")}


# Injected steps of the 2026-12-01 ~21:15 UTC H200 run whose own events show an excess that is
# not the injection's, or is the injection's but unnamed by the trace (measured on the
# captures; docs/diagnosis.md, "H200 data-movement captures"). Each is expected to miss its
# share, strictly: the day it passes, the entry goes. Everything else in the capture is scored.
SHORT_AS_CAPTURED = {
    ("item-recorder", 10): (
        "13.06 ms vs typical 7.67 ms: the reads' span metrics.per_sample is 2.21 ms and transfer_stall takes 2.20 ms "
        "of it, but backward ran 6.65 ms vs 3.53 ms on normal steps before the reads began (the autograd thread's 92 "
        "CUDA calls took 1.14 ms and its gaps between them 4.80 ms, vs medians of 0.57 and 2.15 ms on normal steps; the same 96 kernels, 0.68 ms busy) and forward "
        "+0.43 ms: at most 41% of the excess is the reads'. The 5.39 ms excess by check (2026-12-04): transfer_stall "
        "2.20, host_submission 1.18, gpu_work_growth 0.01, unexplained 2.00 (the autograd thread's longer gaps: no "
        "check's evidence names them; the capture holds 1 scheduler sample of the autograd thread 1135 against 73 of "
        "the step's thread, so whether it ran or waited for a CPU in step 10 cannot be read: cpu_contention's "
        "threads_not_sampled)"),
    ("item-kineto", 15): (
        "17.27 ms vs typical 11.96 ms: forward 5.68 ms and backward 6.38 ms vs 3.89 and 4.76 ms on normal steps "
        "(GPU kernels unchanged, 1.38 ms busy) before the reads; the reads' span is 3.12 ms (59% of the excess), of "
        "which transfer_stall takes 2.41 ms, the rest being the loop's 128 aten::select (0.32 ms) and Python between "
        "the ops, host work in a named span (host_submission by the credit rule): 46% < 50%. The 5.31 ms excess by check "
        "(2026-12-04): transfer_stall 2.41, host_submission 2.69, input_starvation 0.01, unexplained 0.21; Kineto "
        "records no scheduler samples, so the slower forward and backward cannot be told running from waiting"),
    ("recompile-recorder", 8): (
        "2752 ms vs typical 10.6 ms: compilation takes all 1653 ms of the compile spans, but the new sequence length "
        "also made cuDNN build its SDPA plans, which the recorder has no span for: 528 ms in forward (5.3-533.7 ms, "
        "no CUDA call on any thread, up to the memset before the attention's kernels) and 517 ms in backward (the "
        "autograd thread, 2227-2744 ms); the Kineto form names them aten::_cudnn_attention_forward/backward "
        "(65.5/50.5 ms at step 8, 0.1 ms on normal steps): 60% < 80%. The 2741 ms excess by check (2026-12-04): "
        "compilation 1653, host_submission 538, sync_stall 2.7, allocator_churn 0.3, unexplained 548"),
}


def _own_failures(fixture: Path, fails: list[str]) -> list[str]:
    """The failures other than those of the capture's SHORT_AS_CAPTURED steps."""
    short = [f"step {i} (" for (name, i) in SHORT_AS_CAPTURED if name == fixture.name]
    return [f for f in fails if not any(f.startswith(p) for p in short)]


def _score_capture(fixture: Path) -> list[str]:
    truth = json.loads((fixture / "truth.json").read_text())
    prov = json.loads((fixture / "provenance.json").read_text())
    assert prov["gpu"] and prov["torch"] and prov["date_utc"] and prov["command"]
    return failures(score(diagnose_dir(fixture / "incident"), truth))


@pytest.mark.parametrize("fixture", CAPTURES, ids=lambda p: p.name)
def test_h200_capture_explained_by_the_right_cause(fixture):
    assert _own_failures(fixture, _score_capture(fixture)) == []


@pytest.mark.parametrize("name,step", [
    pytest.param(name, step, marks=pytest.mark.xfail(strict=True, reason=why), id=f"{name}-step{step}")
    for (name, step), why in sorted(SHORT_AS_CAPTURED.items())])
def test_h200_step_short_as_captured(name, step):
    fixture = FIX / name
    assert fixture in CAPTURES, f"{name} is not among the captures"
    fails = _score_capture(fixture)
    assert not [f for f in fails if f.startswith(f"step {step} (")]


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
