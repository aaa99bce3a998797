"""A comparison whose arms do different work per step says so: per step it refuses a
verdict, per item it says it compared per item. Runs without declared work are unchanged."""

from __future__ import annotations

from workflow_lib.compare import build as compare
from workflow_lib.core import records

from compare_builders import design, executions, lognormal_values, plan, typed_records


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
    return compare.compare(*typed_records(pl, ex), digests, pd).to_json()


def test_different_work_per_step_refuses_a_step_time_verdict():
    rec = _compare("step", {"A": 4.0, "B": 1.0})
    assert rec["verdict"] == "inconclusive"
    note = next(r for r in rec["reasons"] if "different work per step" in r)
    assert "baseline 4 items/step, candidate 1 items/step" in note and "per: item" in note


def test_per_item_comparison_says_what_it_compared():
    rec = _compare("item", {"A": 4.0, "B": 1.0})
    assert rec["verdict"] == "faster"
    assert any("compared per item" in r for r in rec["reasons"])


def test_equal_work_or_no_declared_work_changes_nothing():
    for items in ({"A": 4.0, "B": 4.0}, None):
        rec = _compare("step", items)
        assert rec["verdict"] == "faster"
        assert not any("work per step" in r for r in rec["reasons"])
