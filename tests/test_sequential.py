"""The sequential design (`trials: {stop: early}`, compare/sequential.py): its looks are fixed
before any run and spend at most 1 - confidence in all; under no change it calls faster/slower
at most that often whenever it stops (a simulation of A/A experiments with noise measured on
the H200: the demo's runs and the producer/consumer job's, whose A/A floor was ±107%); a clear change stops at the first look;
the compare record says where it stopped."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from workflow_lib.compare import sequential as S, stats, verdict as V
from workflow_lib.core import records

from benchmarks.compare_builders import design, executions, lognormal_values, plan, typed_records

FIX = Path(__file__).resolve().parent / "fixtures" / "h200"
EXPERIMENTS = 2000  # per noise source; >= 1,000 as the issue asks


def _run_log_values(*dirs: Path) -> np.ndarray:
    """Every successful baseline run's log metric, centred per execution (block drift removed)."""
    out = []
    for d in dirs:
        for p in sorted((d / "execution").glob("*.json")):
            # baseline runs only (A and A'): an A/B's candidate runs carry its effect
            runs = [r for r in json.loads(p.read_text())["runs"] if r["status"] == "ok" and r["arm"] in ("A", "A'")]
            logs = np.log([r["metric_ns"] for r in runs])
            out.extend(logs - np.median(logs))
    return np.asarray(out)


def _aa_blocks(noise: np.ndarray, m: int, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """m A/A experiments of n blocks, one run per arm: every arm's run drawn from the same measured
    noise, so each block's d and c are symmetric about 0 (the design's exchangeability)."""
    a, b, a2 = (rng.choice(noise, size=(m, n)) for _ in range(3))
    return b - a, a2 - a


def test_the_looks_spend_at_most_alpha_and_each_has_an_interval():
    for limit, wave, conf in ((12, 2, 0.95), (20, 2, 0.95), (12, 1, 0.95), (30, 3, 0.99), (6, 2, 0.95)):
        looks = S.looks(limit, wave, conf)
        assert sum(x["alpha"] for x in looks) <= (1 - conf) * (1 + 1e-9)
        assert looks[-1]["blocks"] == limit
        assert [x["blocks"] for x in looks] == sorted({x["blocks"] for x in looks})
        for x in looks:
            assert stats.walsh_rank(x["blocks"], 1 - x["alpha"]) is not None, (limit, wave, x)
    with pytest.raises(ValueError, match="no look has an interval"):
        S.looks(4, 2, 0.95)


@pytest.mark.parametrize("source", ["h200-demo", "h200-multiprocess"])
def test_false_positive_rate_under_no_change_is_at_most_five_percent(source):
    noise = (_run_log_values(FIX / "demo-aa", FIX / "demo-ab") if source == "h200-demo"
             else _run_log_values(FIX / "multiprocess" / "aa", FIX / "multiprocess" / "ab"))
    assert noise.size >= 24 and noise.std() > 0
    stop = S.design({"blocks": 20, "confidence": 0.95, "stop": "early", "wave_blocks": 2})
    rng = np.random.default_rng(20261203)
    d, c = _aa_blocks(noise, EXPERIMENTS, 20, rng)
    code, used = S.simulate(d, c, stop)
    false = int(np.isin(code, (V.FASTER, V.SLOWER)).sum())
    assert (code >= 0).all()
    # Clopper-Pearson: the 95% upper bound of the rate must itself be <= 5%.
    upper = stats.clopper_pearson_upper(false, EXPERIMENTS, 0.95)
    assert false / EXPERIMENTS <= 0.05 and upper <= 0.05, (false, upper)
    # The same looks tested each at the full 5% (repeated fixed-sample tests) would exceed it more often.
    naive = dataclasses.replace(stop, looks=[dataclasses.replace(x, alpha=0.05) for x in stop.looks])
    naive_code, _ = S.simulate(d, c, naive)
    assert np.isin(naive_code, (V.FASTER, V.SLOWER)).sum() >= false


@pytest.mark.parametrize("source", ["h200-demo", "h200-multiprocess"])
def test_without_a_floor_the_looks_intervals_alone_hold_alpha_and_repeated_tests_do_not(source):
    """The guarantee does not lean on the floor: with a floor of ~0 (controls of no spread), a
    verdict is exactly a look's interval excluding 0. Spent across the looks, that happens at
    most alpha of the time under no change; the same looks each at the full 5% (repeated
    fixed-sample tests) exceed 5%."""
    noise = (_run_log_values(FIX / "demo-aa", FIX / "demo-ab") if source == "h200-demo"
             else _run_log_values(FIX / "multiprocess" / "aa", FIX / "multiprocess" / "ab"))
    rng = np.random.default_rng(11)
    stop = S.design({"blocks": 20, "confidence": 0.95, "stop": "early", "wave_blocks": 2})
    d, _ = _aa_blocks(noise, EXPERIMENTS, 20, rng)
    c = 1e-12 * rng.standard_normal(d.shape)
    code, _ = S.simulate(d, c, stop)
    rate = np.isin(code, (V.FASTER, V.SLOWER)).mean()
    assert rate <= 0.05 and stats.clopper_pearson_upper(int(rate * EXPERIMENTS), EXPERIMENTS) <= 0.06, rate
    naive = dataclasses.replace(stop, looks=[dataclasses.replace(x, alpha=0.05) for x in stop.looks])
    naive_code, _ = S.simulate(d, c, naive)
    naive_rate = np.isin(naive_code, (V.FASTER, V.SLOWER)).mean()
    assert naive_rate > rate  # seeded: demo 1.4% vs 3.85% (its runs' many ties make both tests conservative)
    if source == "h200-multiprocess":
        assert naive_rate > 0.05  # seeded: 2.25% spent vs 11.6% repeated


def test_a_clear_change_stops_at_the_first_look_and_no_change_rules_out_the_minimal_effect():
    stop = S.design({"blocks": 12, "confidence": 0.95, "stop": "early", "wave_blocks": 2})
    rng = np.random.default_rng(3)
    d = -0.3 + 0.01 * rng.standard_normal(12)
    c = 0.01 * rng.standard_normal(12)
    first = stop.looks[0].blocks
    got = S.judge(d[:first], c[:first], stop, 0)
    assert got.stop and got.why == "clears_floor" and S.verdict_code(got) == V.FASTER
    d0 = 0.001 * rng.standard_normal(12)
    got = S.judge(d0[:first], c[:first], stop, 0)
    assert got.stop and got.why == "rules_out_min_effect" and S.verdict_code(got) == V.NO_CHANGE
    noisy = 0.2 * rng.standard_normal(12)
    got = S.judge(noisy[:first], noisy[::-1][:first], stop, 0)
    assert not got.stop and got.why == "continue"
    last = S.judge(noisy, noisy[::-1], stop, len(stop.looks) - 1)
    assert last.stop and last.why == "block_limit"


def test_the_comparison_reads_only_the_stopping_looks_blocks_and_says_so():
    des = design(blocks=12, runs_per_arm=1, control_runs=1)
    des["stop"] = S.design(dict(des, stop="early", wave_blocks=2)).to_json()
    pl = plan(des)
    ex, _, pd = executions(pl, lognormal_values(5, effect=-0.4))
    first = des["stop"]["looks"][0]["blocks"]
    ex = {b: e for b, e in ex.items() if int(b[1:]) < first}
    typed_rec = __import__("workflow_lib.compare.build", fromlist=["compare"]).compare(
        *typed_records(pl, ex), {b: records.digest_of(e) for b, e in ex.items()}, pd)
    assert typed_rec.sequential.look == 1  # a nested class of the typed Comparison
    rec = typed_rec.to_json()
    assert rec["verdict"] == "faster"
    assert rec["counts"]["planned_blocks"] == first
    seq = rec["sequential"]
    assert (seq["look"], seq["blocks_run"], seq["block_limit"], seq["why"]) == (1, first, 12, "clears_floor")
    assert rec["reasons"][0].startswith("sequential design (stop: early)")
    records.validate(rec, "comparison")
    from workflow_lib.report.glance import verdict_line
    assert f"{first} of {first} blocks (stop: early, look 1 of {len(des['stop']['looks'])}, limit 12)" in verdict_line(typed_rec, "i")


def test_a_block_count_that_is_no_look_is_refused():
    des = design(blocks=12, runs_per_arm=1, control_runs=1)
    des["stop"] = S.design(dict(des, stop="early", wave_blocks=2)).to_json()
    pl = plan(des)
    ex, _, pd = executions(pl, lognormal_values(5, effect=-0.4))
    ex = {b: e for b, e in ex.items() if int(b[1:]) < 5}
    from workflow_lib.compare import build
    from workflow_lib.core.errors import RecordError
    with pytest.raises(RecordError, match="no look of the plan's sequential design"):
        build.compare(*typed_records(pl, ex), {b: records.digest_of(e) for b, e in ex.items()}, pd)
