"""Tests written for mutants the mutation pass (tests/tools/mutate.py) found surviving:
each states the fault it catches. docs/security.md lists the pass's result."""

from __future__ import annotations

from workflow_lib.core import records
from workflow_lib.trials import block as trials

from test_trials_runner import _setup


def _fake_runs(monkeypatch, decide):
    """Replace one_run: decide(entry, attempt) -> 'ok' | 'failed'; no process is started."""
    def one_run(spec, design, entry, attempt, log, cap):
        status = decide(entry, attempt)
        return {"index": entry["index"], "arm": entry["arm"], "attempt": attempt, "status": status,
                "exit_code": 0 if status == "ok" else 3, "metric_ns": 1.0 if status == "ok" else None,
                "error": None if status == "ok" else "exit status 3", "metric_source": "recorder_steps"}
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
    # A warm-up that fails before its arm ever ran successfully stops the block at once (a
    # program that cannot run is not retried dozens of times); so the failing warm-ups here
    # come after each arm's first successful measured run, where only counting could matter.
    plan, pd, pre = _setup(tmp_path)
    sched = plan["schedule"]["b000"]
    warm = [e for e in sched if e["arm"] == "warmup"]
    assert warm
    plan = dict(plan, schedule={"b000": [e for e in sched if e["arm"] != "warmup"] + warm})
    _fake_runs(monkeypatch, lambda e, a: "failed" if e["arm"] == "warmup" else "ok")
    plan = dict(plan, design=dict(plan["design"], max_failed_fraction=0.0))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work")
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


# ---- diagnosis checks: boundaries the pass found untested

def _diag():
    from tests.builders import kernel, make_incident, nvml, span, step
    from workflow_lib.diagnose import DiagnoseOptions, diagnose
    return kernel, make_incident, nvml, span, step, DiagnoseOptions, diagnose


MS = 1_000_000


def _finding(inc, check, **opts):
    kernel, make_incident, nvml, span, step, DiagnoseOptions, diagnose = _diag()
    rec = diagnose(inc, incident_id="t", snapshot_digest="0" * 64, options=DiagnoseOptions(**opts))
    return next(f for f in rec["steps"][0]["findings"] if f["check"] == check)


def _starved(wait_start=2 * MS, wait_end=8 * MS, kernels=((0, 2 * MS), (8 * MS, 10 * MS))):
    kernel, make_incident, nvml, span, step, *_ = _diag()
    return make_incident(steps=[step(0, 0, 10 * MS)], kernels=[kernel(a, b) for a, b in kernels],
                         spans=[span("DataLoader next", wait_start, wait_end)], runtime_api=[])


def test_input_wait_of_exactly_the_minimum_gap_is_attributed():
    """GPU idle during the wait == min_gap_ns is enough. (Mutant: < -> <= in input_starvation.)"""
    f = _finding(_starved(), "input_starvation", min_gap_ns=6 * MS)
    assert f["verdict"] == "attributed" and f["explains_ns"] == 6 * MS
    assert _finding(_starved(), "input_starvation", min_gap_ns=6 * MS + 1)["verdict"] == "not_applicable"


def test_a_wait_while_the_gpu_was_busy_is_not_claimed():
    """The host waits 2-8 ms but a kernel runs 0-10 ms: the wait was hidden, nothing is claimed."""
    f = _finding(_starved(kernels=((0, 10 * MS),)), "input_starvation")
    assert f["verdict"] == "not_applicable" and f["evidence"]["gpu_idle_during_wait_ns"] == 0


def _sync_drain():
    from tests.builders import api, clock, kernel, make_incident, step
    return make_incident(
        steps=[step(0, 0, 10 * MS)],
        kernels=[kernel(0, 4 * MS, corr=1), kernel(6_010_000, 10 * MS, corr=2)],
        runtime_api=[api(0, 50_000, corr=1), api(100_000, 4 * MS, name="cudaStreamSynchronize", is_sync=True),
                     api(6 * MS, 6_005_000, corr=2)],
        clock_sync=[clock(0, 1_000)])


def test_sync_drain_of_exactly_the_minimum_gap_is_attributed():
    """GPU idle after the sync == min_gap_ns is enough. (Mutant: < -> <= in sync_stall.)"""
    f = _finding(_sync_drain(), "sync_stall", min_gap_ns=2_010_000)
    assert f["verdict"] == "attributed" and f["explains_ns"] == 2_010_000
    assert _finding(_sync_drain(), "sync_stall", min_gap_ns=2_010_001)["verdict"] != "attributed"


def test_t_ppf_refuses_quantiles_outside_the_open_unit_interval():
    """(Mutant: `q < 1.0` -> `q < 2` in stats.t_ppf: q = 1 or 1.5 would bisect to a bound.)"""
    import pytest

    from workflow_lib.compare.stats import t_ppf
    for q in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="quantile"):
            t_ppf(q, 5)
    assert abs(t_ppf(0.975, 1e6) - 1.959964) < 1e-4
