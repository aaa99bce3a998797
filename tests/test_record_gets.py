"""docs/record_gets.py: the count of `.get(` on records in diagnose, compare and report (issue 37)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rg():
    spec = importlib.util.spec_from_file_location("record_gets", ROOT / "docs" / "record_gets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_tree_has_no_fallback_on_a_record_and_no_unclassified_get(rg, capsys):
    assert rg.main(["--check"]) == 0, capsys.readouterr().out


def test_a_get_of_a_required_field_is_a_fallback(rg):
    # a metric's source is required in plan.design.metric: metric.get("source") is a fallback
    # (execution.runs[].ranks[], this test's earlier example, is a typed Run's Rank since issue 37);
    # per is optional by schema but, the metric being a PlanMetric since issue 37, no reason allows a
    # .get( of it any more: unlisted, which --check fails
    src = 'def _metric_label(metric):\n    metric.get("source")\n    metric.get("per")\n'
    got = [(r["field"], r["class"]) for r in rg.rows_of("compare/build.py", src)]
    assert got == [("source", "fallback"), ("per", "unlisted")]


def test_a_get_no_rule_names_is_unclassified(rg):
    got = rg.rows_of("report/html.py", "def header(m):\n    q = m\n    return q.get('x')\n")
    assert [r["class"] for r in got] == ["unclassified"]


def test_constants_and_accumulators_are_not_records(rg):
    src = "COLORS = {}\ndef f(k, n):\n    n[k] = n.get(k, 0) + 1\n    return COLORS.get(k)\n"
    assert [r["class"] for r in rg.rows_of("report/plots.py", src)] == ["built", "code"]


def test_a_field_the_schema_requires_is_a_fallback_whatever_the_allow_list_says(rg, monkeypatch):
    src = 'def _metric_label(metric):\n    return metric.get("source")\n'
    monkeypatch.setitem(rg.ALLOWED, ("plan.design.metric", "source"), "wrongly allowed")
    assert [r["class"] for r in rg.rows_of("compare/build.py", src)] == ["fallback"]


def test_the_newest_version_s_requirements_count(rg, monkeypatch):
    """execution version 3 requires a run's work (the schema's allOf); without that, as in
    version 2's schema, a .get( of it is optional by the schema (and wants a reason)."""
    real = rg._schema
    monkeypatch.setattr(rg, "_schema", lambda kind, rev: real(kind, None) if rev is None
                        else {k: v for k, v in real(kind, None).items() if k != "allOf"})
    assert "work" in rg.required("execution.runs[]") and "work" not in rg.required("execution.runs[]", "without-allOf")
    src = 'def work_difference(design, run):\n    return run.get("work")\n'
    assert [r["class"] for r in rg.rows_of("compare/build.py", src)] == ["fallback"]
    assert [r["class"] for r in rg.rows_of("compare/build.py", src, "without-allOf")] == ["unlisted"]


def test_an_optional_field_needs_a_reason(rg, monkeypatch):
    # the plan metric's per lost its reason when the metric became a PlanMetric (issue 37)
    src = 'def work_warnings(metric):\n    return metric.get("per")\n'
    assert [r["class"] for r in rg.rows_of("compare/build.py", src)] == ["unlisted"]
    # a reason the tree still uses (report/html.py plan_section), taken away: the tree fails
    monkeypatch.delitem(rg.ALLOWED, ("preflight.missing[]", "problem"))
    assert rg.main(["--check"]) == 1
