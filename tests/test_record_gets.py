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
    # a rank's role is required in execution.runs[].ranks[]: r.get("role") is a fallback
    src = 'def _role_rates(run):\n    for r in run["ranks"]:\n        r.get("role")\n        r.get("total_ns")\n'
    got = [(r["field"], r["class"]) for r in rg.rows_of("compare/job_metrics.py", src)]
    assert got == [("role", "fallback"), ("total_ns", "optional")]


def test_a_get_no_rule_names_is_unclassified(rg):
    got = rg.rows_of("report/html.py", "def header(m):\n    q = m\n    return q.get('x')\n")
    assert [r["class"] for r in got] == ["unclassified"]


def test_constants_and_accumulators_are_not_records(rg):
    src = "COLORS = {}\ndef f(k, n):\n    n[k] = n.get(k, 0) + 1\n    return COLORS.get(k)\n"
    assert [r["class"] for r in rg.rows_of("report/plots.py", src)] == ["built", "code"]


def test_an_allowed_field_the_schema_requires_fails_the_check(rg, monkeypatch):
    assert rg.schema_conflicts() == []
    monkeypatch.setitem(rg.ALLOWED, ("plan.design.metric", "source"), "wrongly allowed")
    assert rg.schema_conflicts() == ["plan.design.metric source: the schema requires it; read it directly"]
