"""Tests written for mutants the mutation pass (tests/tools/mutate.py) found surviving:
each states the fault it catches. docs/security.md lists the pass's result."""

from __future__ import annotations

from workflow_lib import records, trials

from test_trials_runner import _setup


def _fake_runs(monkeypatch, decide):
    """Replace one_run: decide(entry, attempt) -> 'ok' | 'failed'; no process is started."""
    def one_run(spec, design, entry, attempt, log, cap):
        status = decide(entry, attempt)
        return {"index": entry["index"], "arm": entry["arm"], "attempt": attempt, "status": status,
                "exit_code": 0 if status == "ok" else 3, "metric_ns": 1.0 if status == "ok" else None}
    monkeypatch.setattr(trials, "one_run", one_run)


def _block(tmp_path, monkeypatch, decide):
    plan, pd, pre = _setup(tmp_path)
    _fake_runs(monkeypatch, decide)
    return plan, trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work")


def test_the_last_retry_decides_a_runs_status(tmp_path, monkeypatch):
    """Every run fails its first attempt and passes its retry: the block is complete.
    (Mutant: the first attempt decides -> too_many_failures.)"""
    plan, rec = _block(tmp_path, monkeypatch, lambda e, a: "failed" if a == 0 else "ok")
    assert rec["status"] == "complete"
    assert len(rec["runs"]) == 2 * len(plan["schedule"]["b000"])  # every attempt is kept


def test_failures_after_retries_decide_too_many_failures(tmp_path, monkeypatch):
    plan, rec = _block(tmp_path, monkeypatch, lambda e, a: "failed" if e["arm"] == "B" else "ok")
    counted = [e for e in plan["schedule"]["b000"] if e["arm"] != "warmup"]
    failed = [e for e in counted if e["arm"] == "B"]
    assert len(failed) / len(counted) > 0.34
    assert rec["status"] == "too_many_failures"


def test_warmup_failures_are_not_counted(tmp_path, monkeypatch):
    """(Mutant: warm-up runs counted -> a failing warm-up alone blocks the block.)"""
    plan, rec = _block(tmp_path, monkeypatch, lambda e, a: "failed" if e["arm"] == "warmup" else "ok")
    assert any(e["arm"] == "warmup" for e in plan["schedule"]["b000"])
    assert rec["status"] == "complete"


def test_failed_fraction_at_the_limit_is_not_too_many(tmp_path, monkeypatch):
    """The limit is 'more than max_failed_fraction': exactly at it passes. (Mutant: > -> >=.)"""
    plan, pd, pre = _setup(tmp_path)
    counted = [e for e in plan["schedule"]["b000"] if e["arm"] != "warmup"]
    first = counted[0]["index"]
    _fake_runs(monkeypatch, lambda e, a: "failed" if e["index"] == first else "ok")
    plan = dict(plan, design=dict(plan["design"], max_failed_fraction=1 / len(counted)))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work")
    assert rec["status"] == "complete"
    plan = dict(plan, design=dict(plan["design"], max_failed_fraction=1 / len(counted) - 1e-9))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work2")
    assert rec["status"] == "too_many_failures"
