"""A comparison whose arms do different work per step says so: per step its verdict carries the
warning (reasons and the end line), per item it says it compared per item; arms whose argv
differ in a work flag are warned about too. Runs without declared work are unchanged."""

from __future__ import annotations

from workflow_lib.compare import build as compare
from workflow_lib.core import records

from benchmarks.compare_builders import design, executions, lognormal_values, plan, typed_records


def _with_work(ex: dict, items: dict[str, float]) -> dict:
    for e in ex.values():
        for r in e["runs"]:
            if r["status"] == "ok":
                r["work"] = {"items_per_step": items["B" if r["arm"] == "B" else "A"], "tokens_per_step": None}
                r["metric_source"] = "recorder_steps"
        e["schema_version"] = 2
    return ex


def _compare(per: str, items: dict[str, float] | None, effect=-0.5):
    des = design()
    des["metric"]["per"] = per
    pl = plan(des)
    ex, _, pd = executions(pl, lognormal_values(3, effect=effect))
    if items is not None:
        ex = _with_work(ex, items)
    digests = {b: records.digest_of(e) for b, e in ex.items()}
    return compare.compare(*typed_records(pl, ex), digests, pd)


def test_different_work_per_step_warns_beside_a_step_time_verdict():
    typed_rec = _compare("step", {"A": 4.0, "B": 1.0})
    rec = typed_rec.to_json()
    assert rec["verdict"] == "faster"  # true of step time; the warning says it is not a speedup
    note = next(r for r in rec["reasons"] if "different work per step" in r)
    assert "baseline 4 items/step, candidate 1 items/step" in note and "per: item" in note
    assert note in rec["warnings"] and rec["reasons"][0] == note
    from workflow_lib.report.glance import verdict_line
    assert "different work per step" in verdict_line(typed_rec, "i")


def test_a_work_flag_that_differs_between_the_arms_is_warned_about():
    des = design()
    pl = plan(des)
    pl["arms"]["candidate"]["argv"] = [*pl["arms"]["baseline"]["argv"], "--batch_size", "40"]
    pl["arms"]["baseline"]["argv"] = [*pl["arms"]["baseline"]["argv"], "--batch_size", "20"]
    ex, _, pd = executions(pl, lognormal_values(3, effect=-0.5))
    digests = {b: records.digest_of(e) for b, e in ex.items()}
    rec = compare.compare(*typed_records(pl, ex), digests, pd)
    note = next(w for w in rec.warnings if "--batch_size 20 -> 40" in w)
    assert "per-step verdict" in note and "tokens_per_step" in note


def test_per_item_comparison_says_what_it_compared():
    rec = _compare("item", {"A": 4.0, "B": 1.0}).to_json()
    assert rec["verdict"] == "faster"
    assert any("compared per item" in r for r in rec["reasons"])


def test_equal_work_or_no_declared_work_changes_nothing():
    for items in ({"A": 4.0, "B": 4.0}, None):
        rec = _compare("step", items).to_json()
        assert rec["verdict"] == "faster"
        assert not any("work per step" in r for r in rec["reasons"])
