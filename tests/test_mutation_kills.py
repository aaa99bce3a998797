"""Tests written for mutants the mutation pass (tests/tools/mutate.py) found surviving:
each states the fault it catches. docs/security.md lists the pass's result."""

from __future__ import annotations

import dataclasses

from workflow_lib.core import records
from workflow_lib.trials import block as trials
from workflow_lib.trials.runner import FakeRunner

from test_trials_runner import _setup


def _fake_runs(decide):
    """A FakeRunner: decide(entry, attempt) -> 'ok' | 'failed'; no process is started."""
    return FakeRunner(lambda req: ([1.0], None) if decide(req.entry, req.attempt) == "ok" else ([], "exit status 3"))


def _block(tmp_path, decide):
    plan, pd, pre = _setup(tmp_path)
    return plan, trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work",
                                  runner=_fake_runs(decide))


def test_the_last_retry_decides_a_runs_status(tmp_path, monkeypatch):
    """Every run fails its first attempt and passes its retry: the block is complete.
    (Mutant: the first attempt decides -> too_many_failures.)"""
    plan, rec = _block(tmp_path, lambda e, a: "failed" if a == 0 else "ok")
    assert rec.status == "complete"
    assert len(rec.runs) == 2 * len(plan.schedule["b000"])  # every attempt is kept


def test_failures_after_retries_decide_too_many_failures(tmp_path, monkeypatch):
    plan, rec = _block(tmp_path, lambda e, a: "failed" if e["arm"] == "B" else "ok")
    counted = [e for e in plan.schedule["b000"] if e["arm"] != "warmup"]
    failed = [e for e in counted if e["arm"] == "B"]
    assert len(failed) / len(counted) > 0.34
    assert rec.status == "too_many_failures"


def test_warmup_failures_are_not_counted(tmp_path, monkeypatch):
    """(Mutant: warm-up runs counted -> a failing warm-up alone blocks the block.)"""
    # A warm-up that fails before its arm ever ran successfully stops the block at once (a
    # program that cannot run is not retried dozens of times); so the failing warm-ups here
    # come after each arm's first successful measured run, where only counting could matter.
    plan, pd, pre = _setup(tmp_path)
    sched = plan.schedule["b000"]
    warm = [e for e in sched if e["arm"] == "warmup"]
    assert warm
    plan = dataclasses.replace(plan, schedule={"b000": [e for e in sched if e["arm"] != "warmup"] + warm})
    fake = _fake_runs(lambda e, a: "failed" if e["arm"] == "warmup" else "ok")
    plan = dataclasses.replace(plan, design=dataclasses.replace(plan.design, max_failed_fraction=0.0))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work", runner=fake)
    assert rec.status == "complete"


def test_failed_fraction_at_the_limit_is_not_too_many(tmp_path, monkeypatch):
    """The limit is 'more than max_failed_fraction': exactly at it passes. (Mutant: > -> >=.)"""
    plan, pd, pre = _setup(tmp_path)
    counted = [e for e in plan.schedule["b000"] if e["arm"] != "warmup"]
    first = counted[0]["index"]
    fake = _fake_runs(lambda e, a: "failed" if e["index"] == first else "ok")
    plan = dataclasses.replace(plan, design=dataclasses.replace(plan.design, max_failed_fraction=1 / len(counted)))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work", runner=fake)
    assert rec.status == "complete"
    plan = dataclasses.replace(plan, design=dataclasses.replace(plan.design, max_failed_fraction=1 / len(counted) - 1e-9))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work2", runner=fake)
    assert rec.status == "too_many_failures"


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


# ---- the seven survivors of the 2026-12-01 pass (docs/security.md), each killed here

def test_exactly_the_fewest_blocks_can_decide():
    """n == min_blocks is enough for a verdict. (Mutant: verdict.py `n >= need` -> `n > need`.)"""
    import numpy as np

    from workflow_lib.compare import stats, verdict

    need = stats.min_blocks(0.95)
    d = -0.1 + np.linspace(-0.002, 0.002, need)  # every block ~10% faster
    c = np.linspace(-0.001, 0.001, need)  # A/A controls that agree
    dec = verdict.decide(d, c, 0.95)
    assert dec.n_blocks == need and int(dec.verdict) == verdict.FASTER
    assert int(verdict.decide(d[:-1], c, 0.95).verdict) == verdict.INCONCLUSIVE  # one fewer: no interval


def test_a_sync_after_the_steps_last_gpu_work_drains_to_the_step_end():
    """No GPU work starts after the sync returns: the idle time up to the step's end is the
    sync's. (Mutant: base.next_gpu_start `j < g.size` -> `<=`: the drain ends where the call does.)"""
    from tests.builders import api, clock, kernel, make_incident, step

    inc = make_incident(steps=[step(0, 0, 10 * MS)], kernels=[kernel(0, 4 * MS, corr=1)],
                        runtime_api=[api(0, 50_000, corr=1), api(100_000, 4 * MS, name="cudaStreamSynchronize", is_sync=True)],
                        clock_sync=[clock(0, 1_000)])
    f = _finding(inc, "sync_stall")
    assert f["verdict"] == "attributed" and f["explains_ns"] == 6 * MS


def test_throttle_cost_with_no_busy_time_or_no_amount_is_empty():
    """(Mutant: clock_throttle._take_tail `or` -> `and`: an empty busy set is indexed, and a zero
    amount claims the last busy interval.)"""
    import numpy as np

    from workflow_lib.diagnose.checks.clock_throttle import _take_tail
    from workflow_lib.diagnose.measures import Intervals

    none = Intervals(np.zeros(0, np.int64), np.zeros(0, np.int64))
    busy = Intervals(np.array([0, 20], np.int64), np.array([10, 30], np.int64))
    assert len(_take_tail(none, 5)) == 0
    assert len(_take_tail(busy, 0)) == 0
    got = _take_tail(busy, 15)
    assert got.start_ns.tolist() == [5, 20] and got.end_ns.tolist() == [10, 30]


def test_a_gap_past_the_last_scheduler_sample_is_not_bracketed():
    """(Mutant: host_submission._host_state `i1 >= size` -> `>`: the sample past the last is read.)"""
    from types import SimpleNamespace

    import numpy as np

    from workflow_lib.diagnose.checks.host_submission import _host_state

    ev = SimpleNamespace(sched={7: SimpleNamespace(ts_ns=np.array([0, 10], np.int64))})
    state, detail = _host_state(ev, 7, 5, 20)  # the gap ends after the last sample
    assert state is None and detail["reason"] == "scheduler samples do not bracket the gap"


def _launches(n: int, *, step_ns: int | None = None):
    """n 2 us kernels, each after a 10 us launch call (test_diagnose_checks.test_launch_bound's case)."""
    from tests.builders import api, kernel, make_incident, step

    ks, calls = [], []
    for i in range(n):
        t = i * 10_000
        calls.append(api(t, t + 10_000, corr=i))
        ks.append(kernel(t + 10_000, t + 12_000, corr=i))
    return make_incident(steps=[step(0, 0, step_ns or n * 10_000 + 12_000)], kernels=ks, runtime_api=calls)


def test_exactly_the_minimum_kernel_count_is_enough_for_launch_bound():
    """(Mutant: launch_bound `n < min_kernels` -> `<=`.)"""
    assert _finding(_launches(60), "launch_bound", min_gap_ns=5_000, launch_bound_min_kernels=60)["verdict"] == "attributed"
    assert _finding(_launches(60), "launch_bound", min_gap_ns=5_000, launch_bound_min_kernels=61)["verdict"] == "not_applicable"


def test_short_kernels_without_much_host_launch_time_are_not_launch_bound():
    """Every kernel is shorter than its launch, but launching takes 1% of a long step: either
    fraction below its threshold rules launch-bound out. (Mutant: launch_bound `or` -> `and`.)"""
    f = _finding(_launches(60, step_ns=60 * MS), "launch_bound", min_gap_ns=5_000)
    assert f["evidence"]["short_kernel_fraction"] == 1.0 and f["evidence"]["host_in_launch_fraction"] < 0.5
    assert f["verdict"] == "not_applicable"


def test_a_zero_length_step_is_not_gpu_bound():
    """(Mutants: gpu_bound `wall > 0` -> `wall >= 0`: busy / 0 in the fraction; and in the verdict,
    with a threshold of 0, a step of no time would be called GPU-bound.)"""
    from tests.builders import kernel, make_incident, step

    inc = make_incident(steps=[step(0, 5 * MS, 5 * MS)], kernels=[kernel(0, MS)])
    for threshold in (0.9, 0.0):
        f = _finding(inc, "gpu_bound", gpu_bound_min_busy_fraction=threshold)
        assert f["verdict"] == "not_applicable" and f["evidence"]["busy_fraction"] == 0.0
