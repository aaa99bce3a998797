"""The diagnosis (all steps of a rank at once) must agree with the per-step reference
(tests/reference_diagnosis): what tests/test_diagnose_batch.py asserts on the fixtures, and
what conftest.py asserts around every diagnosis the check tests make (their synthetic incidents hold the branches of each
check: launch-bound loops, throttled clocks, violation counters, scheduler brackets)."""

from __future__ import annotations


def without_evidence(step: dict) -> dict:
    return dict(step, findings=[{k: v for k, v in f.items() if k != "evidence"} for f in step["findings"]])


def assert_same(per_step: dict, batched: dict) -> None:
    """The diagnosis equals the per-step reference but for the evidence of steps it did not keep."""
    assert len(per_step["steps"]) == len(batched["steps"])
    for sa, sb in zip(per_step["steps"], batched["steps"]):
        assert without_evidence(sa) == without_evidence(sb), (sa["rank"], sa["step_id"])
        if any(f["evidence"] for f in sb["findings"]):  # a step kept in detail: all of it
            assert sa == sb, (sa["rank"], sa["step_id"])
    assert per_step["summary"] == batched["summary"]
    assert per_step["next_experiments"] == batched["next_experiments"]


def crosschecked(diagnose):
    """`diagnose` that also runs the per-step reference on the same input and compares."""
    from tests import reference_diagnosis

    def both(incident, **kw):
        rec = diagnose(incident, **kw)
        if kw.get("spool") is None:
            assert_same(reference_diagnosis.diagnose(incident, **dict(kw, validate=False)), rec)
        return rec

    return both
