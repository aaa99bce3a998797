"""Statistical validation of the comparison, plus its edge cases.

The simulations use benchmarks/noise_model.py (drift, t3 heavy tails, one-sided
outliers, bimodal clock states per block and per run) with schedules from the real
make_schedule, and judge every simulated experiment with the same verdict.decide that
compare.compare uses (vectorized: thousands of experiments in one call). A separate
test checks that compare.compare, fed the same values as execution records, reaches
the same verdicts. Seeded; the whole file runs in a few seconds on 2 cores.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from benchmarks.noise_model import Design, NoiseModel, simulate
from benchmarks import compare_builders as cb
from workflow_lib.compare import build as C, rule as compare_rule
from workflow_lib.core import records
from workflow_lib.compare import stats
from workflow_lib.compare import verdict as V
from workflow_lib.core.errors import RecordError

HARSH = NoiseModel()  # 1% t3 noise + outliers + clock states
HARSH_DRIFT = NoiseModel(drift=0.05)  # ... plus 5% linear drift over the experiment
PLAIN = NoiseModel(outlier_p=0.0, slow_block_p=0.0, flip_p=0.0)  # 1% noise only


def verdict_counts(sim, confidence=0.95) -> np.ndarray:
    return np.bincount(V.decide(sim.d, sim.c, confidence).verdict, minlength=4)


# --- statistical validation ---------------------------------------------------------


@pytest.mark.parametrize("blocks", [20, 6])
def test_aa_false_verdicts_at_most_one_percent(blocks):
    experiments = 2000
    counts = verdict_counts(simulate(HARSH_DRIFT, Design(blocks=blocks), experiments, seed=100 + blocks))
    false = int(counts[V.FASTER] + counts[V.SLOWER])
    upper = stats.clopper_pearson_upper(false, experiments, 0.95)
    print(f"\nA/A {blocks} blocks: {false}/{experiments} faster/slower = {false / experiments:.2%}, "
          f"95% Clopper-Pearson upper bound {upper:.2%}; verdicts {dict(zip(V.VERDICTS, counts.tolist()))}")
    assert upper <= 0.01
    if blocks >= 20:  # with enough blocks the A/A result is a confident "no change"
        assert counts[V.NO_CHANGE] / experiments >= 0.99


@pytest.mark.parametrize("model", [HARSH, PLAIN], ids=["harsh", "plain"])
@pytest.mark.parametrize("effect", [0.02, -0.02])
def test_two_percent_change_detected_at_20_blocks(model, effect):
    experiments = 500
    counts = verdict_counts(simulate(NoiseModel(**{**model.__dict__, "effect": effect}), Design(blocks=20), experiments, seed=7))
    right = counts[V.SLOWER if effect > 0 else V.FASTER]
    wrong = counts[V.FASTER if effect > 0 else V.SLOWER]
    lower, _ = stats.clopper_pearson(int(right), experiments, 0.95)
    print(f"\neffect {effect:+.0%}: detected {right}/{experiments}, 95% lower bound {lower:.1%}")
    assert right / experiments >= 0.90 and lower >= 0.90
    assert wrong == 0


def test_drift_creates_no_verdict_when_interleaved_but_does_when_sequential():
    # 10% linear drift over the whole experiment (0.03% per run): the same time slots,
    # the same noise; only the order of arms differs.
    model, experiments = NoiseModel(drift=0.10), 2000
    inter = verdict_counts(simulate(model, Design(), experiments, seed=21, interleaved=True))
    seq = verdict_counts(simulate(model, Design(), experiments, seed=21, interleaved=False))
    inter_false = int(inter[V.FASTER] + inter[V.SLOWER])
    upper = stats.clopper_pearson_upper(inter_false, experiments)
    print(f"\ndrift interleaved: {inter_false}/{experiments} verdicts (95% upper {upper:.2%}); "
          f"sequential: {seq[V.SLOWER]}/{experiments} 'slower'")
    assert upper <= 0.01
    assert seq[V.SLOWER] / experiments >= 0.95


def test_mde_is_roughly_calibrated():
    # A true effect of the reported MDE is detected near the stated 80% power.
    design = Design()
    mde = float(np.median(V.decide(*_dc(simulate(HARSH, design, 500, seed=31)), 0.95).mde_log))
    sim = simulate(NoiseModel(**{**HARSH.__dict__, "effect": float(np.expm1(mde))}), design, 500, seed=32)
    power = verdict_counts(sim)[V.SLOWER] / 500
    print(f"\nMDE {mde:.4f} log; detected {power:.0%} at that effect")
    assert 0.6 <= power <= 0.97


def _dc(sim):
    return sim.d, sim.c


def test_compare_agrees_with_vectorized_decision():
    design = Design(blocks=8, runs_per_arm=3, control_runs=3)
    models = [HARSH, NoiseModel(**{**HARSH.__dict__, "effect": 0.03}), NoiseModel(**{**HARSH.__dict__, "noise": 0.08})]
    for seed, model in enumerate(models):
        sim = simulate(model, design, 12, seed=40 + seed)
        expected = V.decide(sim.d, sim.c, design.confidence).verdict
        for e in range(12):
            got = _compare_simulated(sim, e, design)
            records.validate(got, "comparison")
            assert got["verdict"] == V.VERDICTS[expected[e]]


def _compare_simulated(sim, e: int, design: Design) -> dict:
    pl = cb.plan(cb.design(blocks=design.blocks, runs_per_arm=design.runs_per_arm,
                           control_runs=design.control_runs, warmup_runs=design.warmup_runs))
    arrays = {"A": sim.a_block_ns[e], "B": sim.b_block_ns[e], "A'": sim.c_block_ns[e]}

    def value(k: int, arm: str, i: int) -> float:
        if arm == "warmup":
            return 1.0e6
        pos = [r["index"] for r in pl["schedule"][f"b{k:03d}"] if r["arm"] == arm].index(i)
        return float(arrays[arm][k, pos])

    ex, dg, pd = cb.executions(pl, value)
    return C.compare(*cb.typed_records(pl, ex), dg, pd).to_json()


# --- edge cases through the full record path -----------------------------------------


def _run(des=None, values=None, same_as_baseline=False, **kw):
    pl = cb.plan(des or cb.design(), same_as_baseline=same_as_baseline)
    ex, dg, pd = cb.executions(pl, values or cb.lognormal_values(1), **kw)
    return pl, ex, dg, pd


def _judge(pl, ex, dg, pd) -> dict:
    rec = C.compare(*cb.typed_records(pl, ex), dg, pd).to_json()
    records.validate(rec, "comparison")
    records.canonical_bytes(rec)  # finite numbers only (NaN would be refused on write)
    return rec


def test_one_block_is_inconclusive():
    rec = _judge(*_run(cb.design(blocks=1)))
    assert rec["verdict"] == "inconclusive"
    assert rec["counts"]["valid_blocks"] == 1
    assert any("too few valid blocks: 1 < 6" in r for r in rec["reasons"])
    assert rec["estimate"]["log_low"] is None and rec["estimate"]["ratio"] is not None


def test_zero_variance_no_change():
    rec = _judge(*_run(values=lambda k, arm, i: 2_000_000.0))
    assert rec["verdict"] == "no_detectable_change"
    assert rec["estimate"]["ratio"] == 1.0 and rec["noise_floor"]["log"] == 0.0 and rec["mde"]["log"] == 0.0


def test_zero_variance_constant_effect_is_slower():
    rec = _judge(*_run(values=lambda k, arm, i: 2_060_000.0 if arm == "B" else 2_000_000.0))
    assert rec["verdict"] == "slower"
    assert rec["estimate"]["change_pct"] == pytest.approx(3.0)


def test_clear_speedup_is_faster():
    rec = _judge(*_run(cb.design(blocks=10), values=cb.lognormal_values(3, effect=-0.05)))
    assert rec["verdict"] == "faster" and rec["estimate"]["ratio_high"] < 1


def test_aa_flag_and_no_change():
    rec = _judge(*_run(cb.design(blocks=12), values=cb.lognormal_values(4), same_as_baseline=True))
    assert rec["aa_experiment"] is True
    assert rec["verdict"] == "no_detectable_change"
    assert rec["reasons"][-1].startswith("deliberate A/A experiment (candidate = baseline): the noise floor")


def test_aa_experiment_with_a_verdict_warns_about_the_setup():
    # A setup whose candidate runs are systematically slower although it is the baseline.
    values = lambda k, arm, i: 2.2e6 if arm == "B" else 2.0e6  # noqa: E731
    rec = _judge(*_run(cb.design(blocks=8), values=values, same_as_baseline=True))
    assert rec["verdict"] == "slower"
    assert "the setup itself is unstable" in rec["reasons"][-1]


def _mark(ex, dg, blocks, status=None, tamper=None):
    for b in blocks:
        if status:
            ex[b]["status"] = status
        if tamper:
            tamper(ex[b])
        dg[b] = records.digest_of(ex[b])


def _double_b(execution):
    for r in execution["runs"]:
        if r["arm"] == "B" and r["metric_ns"] is not None:
            r["metric_ns"] *= 2.0


def test_too_many_failures_blocks_excluded_not_averaged():
    des = cb.design(blocks=12)
    pl, ex, dg, pd = _run(des, cb.lognormal_values(5, effect=0.04))
    clean = _judge(*_run(des, cb.lognormal_values(5, effect=0.04)))
    # Three marked blocks carry absurd B values: averaging them in would move the estimate.
    _mark(ex, dg, ["b001", "b004", "b007"], status="too_many_failures", tamper=_double_b)
    rec = _judge(pl, ex, dg, pd)
    assert rec["counts"]["excluded_by_reason"] == {"too_many_failures": 3}
    assert rec["counts"]["valid_blocks"] == 9
    used = [b["log_ratio"] for b in clean["blocks"] if b["block"] not in ("b001", "b004", "b007")]
    est, _, _ = stats.hodges_lehmann(np.asarray(used), 0.95)
    assert rec["estimate"]["log_ratio"] == pytest.approx(float(est))
    assert rec["verdict"] == "slower"
    assert any("excluded blocks" in r and "3 too_many_failures" in r for r in rec["reasons"])


def test_environment_change_is_inconclusive_and_excluded():
    pl, ex, dg, pd = _run(cb.design(blocks=12), cb.lognormal_values(6, effect=0.05))
    _mark(ex, dg, ["b003"], status="environment_changed")
    rec = _judge(pl, ex, dg, pd)
    assert rec["verdict"] == "inconclusive"
    assert rec["counts"]["excluded_by_reason"] == {"environment_changed": 1}
    assert rec["reasons"][0].startswith("environment changed mid-run in block(s) b003")
    assert next(b for b in rec["blocks"] if b["block"] == "b003")["used"] is False


def test_failures_beyond_budget_excluded_even_if_marked_complete():
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3, max_failed_fraction=0.25)
    pl = cb.plan(des)
    measured = [r["index"] for r in pl["schedule"]["b002"] if r["arm"] != "warmup"]
    pd = records.digest_of(pl)
    ex = {b: cb.execution(pl, pd, b, lambda arm, i: 2e6, failed=frozenset(measured[:3] if b == "b002" else ()))
          for b in pl["schedule"]}
    dg = {b: records.digest_of(e) for b, e in ex.items()}
    rec = _judge(pl, ex, dg, pd)
    blk = next(b for b in rec["blocks"] if b["block"] == "b002")
    assert blk["exclusion"] == "failed_fraction_exceeded" and blk["failed_runs"] == 3 and blk["failed_attempts"] == 9
    assert rec["counts"]["valid_blocks"] == 7


def test_failed_runs_within_budget_recorded_and_used():
    pl = cb.plan(cb.design(blocks=8, runs_per_arm=4, control_runs=4))
    pd = records.digest_of(pl)
    first_a = next(r["index"] for r in pl["schedule"]["b000"] if r["arm"] == "A")
    ex = {b: cb.execution(pl, pd, b, lambda arm, i: 2e6, failed=frozenset([first_a] if b == "b000" else ()))
          for b in pl["schedule"]}
    dg = {b: records.digest_of(e) for b, e in ex.items()}
    blk = _judge(pl, ex, dg, pd)["blocks"][0]
    assert blk["used"] and blk["runs_ok"]["A"] == 3 and blk["failed_runs"] == 1 and blk["failed_attempts"] == 3


def test_all_blocks_failed_is_inconclusive():
    pl, ex, dg, pd = _run(cb.design(blocks=6))
    _mark(ex, dg, list(ex), status="too_many_failures")
    rec = _judge(pl, ex, dg, pd)
    assert rec["verdict"] == "inconclusive" and rec["counts"]["valid_blocks"] == 0
    assert rec["estimate"]["ratio"] is None and rec["noise_floor"]["log"] is None and rec["mde"]["log"] is None


def test_missing_execution_is_excluded():
    pl, ex, dg, pd = _run(cb.design(blocks=10))
    del ex["b005"], dg["b005"]
    rec = _judge(pl, ex, dg, pd)
    assert rec["counts"]["excluded_by_reason"] == {"missing_execution": 1}
    assert rec["verdict"] == "no_detectable_change"


def test_bad_metric_block_excluded():
    pl, ex, dg, pd = _run(cb.design(blocks=10))

    def zero_a(execution):
        next(r for r in execution["runs"] if r["arm"] == "A")["metric_ns"] = 0.0

    _mark(ex, dg, ["b000"], tamper=zero_a)
    rec = _judge(pl, ex, dg, pd)
    assert rec["blocks"][0]["exclusion"] == "bad_metric"


def test_no_controls_means_no_floor_and_no_verdict():
    rec = _judge(*_run(cb.design(blocks=10, control_runs=0), cb.lognormal_values(7, effect=0.05)))
    assert rec["verdict"] == "inconclusive"
    assert any("noise floor not measured" in r for r in rec["reasons"])


def test_noise_too_high_is_inconclusive():
    rec = _judge(*_run(cb.design(blocks=8), cb.lognormal_values(8, noise=0.3)))
    assert rec["verdict"] == "inconclusive"
    assert any(r.startswith("noise too high") for r in rec["reasons"])


def test_statistics_failure_is_inconclusive(monkeypatch):
    pl, ex, dg, pd = _run(cb.design(blocks=10), cb.lognormal_values(9, effect=0.2))

    def broken(*a, **k):
        raise FloatingPointError("overflow encountered")

    monkeypatch.setattr(V, "decide", broken)
    rec = _judge(pl, ex, dg, pd)
    assert rec["verdict"] == "inconclusive"
    assert any("statistics failed (overflow encountered)" in r for r in rec["reasons"])


def test_execution_from_other_plan_refused():
    pl, ex, dg, pd = _run()
    ex["b001"] = copy.deepcopy(ex["b001"])
    ex["b001"]["plan_digest"] = "f" * 64
    with pytest.raises(RecordError, match=r"execution/b001.json: was run for a different plan"):
        C.compare(*cb.typed_records(pl, ex), dg, pd)


def test_block_not_in_plan_refused():
    pl, ex, dg, pd = _run()
    ex["b099"], dg["b099"] = ex["b000"], dg["b000"]
    with pytest.raises(RecordError, match="b099.json: block is not in the plan"):
        C.compare(*cb.typed_records(pl, ex), dg, pd)


def test_arm_mismatch_refused():
    pl, ex, dg, pd = _run()
    run = next(r for r in ex["b000"]["runs"] if r["arm"] == "A")
    run["arm"] = "B"
    with pytest.raises(RecordError, match="does not follow this plan"):
        C.compare(*cb.typed_records(pl, ex), dg, pd)


def test_record_writes(tmp_path):
    rec = _judge(*_run(cb.design(blocks=7)))
    digest = records.write_record(tmp_path / "comparison.json", rec, "comparison")
    assert records.read_record(tmp_path / "comparison.json", "comparison") == rec and len(digest) == 64


def test_write_comparison_from_files(tmp_path):
    pl, ex, dg, pd = _run(cb.design(blocks=8), cb.lognormal_values(11, effect=0.06))
    records.write_record(tmp_path / "plan.json", pl, "plan")
    paths = []
    for b, e in ex.items():
        paths.append(tmp_path / f"{b}.json")
        records.write_record(paths[-1], e, "execution")
    digest = compare_rule.run(tmp_path / "plan.json", paths, tmp_path / "comparison.json")
    rec = records.read_record(tmp_path / "comparison.json", "comparison")
    assert records.digest_of(rec) == digest and rec["plan_digest"] == pd and rec["execution_digests"] == dg
    assert rec["verdict"] == "slower"
    with pytest.raises(RecordError, match="second execution record"):
        compare_rule.run(tmp_path / "plan.json", paths + paths[:1], tmp_path / "c2.json")


def test_extreme_values_do_not_overflow_the_record():
    # A candidate 1e300 times slower: log ratios stay finite, ratios beyond a double are null.
    rec = _judge(*_run(cb.design(blocks=8), values=lambda k, arm, i: 1e305 if arm == "B" else 1e-5 * (1 + 0.01 * (i % 3))))
    assert rec["verdict"] == "slower"
    assert rec["estimate"]["log_ratio"] > 700 and rec["estimate"]["ratio"] is None
    assert any("estimate n/a%" in r for r in rec["reasons"])


def test_environment_change_reason_does_not_claim_noise():
    pl, ex, dg, pd = _run(cb.design(blocks=12), cb.lognormal_values(12))
    _mark(ex, dg, ["b000"], status="environment_changed")
    rec = _judge(pl, ex, dg, pd)
    assert rec["verdict"] == "inconclusive"
    assert not any(r.startswith("noise too high") for r in rec["reasons"])


def test_malformed_execution_is_one_line_error():
    pl, ex, dg, pd = _run()
    del ex["b002"]["runs"][0]["metric_ns"]
    with pytest.raises(RecordError, match=r"^execution/b002.json: violates execution schema at runs/0"):
        C.compare(*cb.typed_records(pl, ex), dg, pd)
