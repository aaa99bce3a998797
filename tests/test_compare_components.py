"""Why it changed: per-component estimates with their own A/A floors (compare_components.py).

The statistical claims are checked the way the headline's are (test_compare_stats.py):
thousands of simulated experiments judged in one vectorized verdict.decide call, the very
function compare.compare calls per component, plus a check that the record path agrees."""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks.noise_model import Design
from benchmarks import compare_builders as cb
from tests import component_builders as B
from workflow_lib.compare import build as C
from workflow_lib.compare import by_component as CC
from workflow_lib.core import records
from workflow_lib.compare import stats
from workflow_lib.compare import verdict as V

MS = 1e6


def _rng_parts(seed: int, means: dict[str, float], sd: float = 0.03):
    """comp_of with independent log-normal noise per run and component; `means(arm)` -> parts."""
    rng = np.random.default_rng(seed)

    def comp_of(k, arm, i, *, extra=None):
        if arm == "warmup":
            return B.components({n: 1.0 * MS for n in B.PARTS})
        parts = {n: v * float(np.exp(sd * rng.standard_normal())) for n, v in means(arm).items()}
        return B.components(parts, **(extra or {}))

    return comp_of


def _compare(pl, ex, dg, pd) -> dict:
    rec = C.compare(*cb.typed_records(pl, ex), dg, pd).to_json()
    records.validate(rec, "comparison")
    return rec


def _by(rec) -> dict[str, dict]:
    return {r["name"]: r for r in rec["components"]}


# --- the demo through real Snakemake ---------------------------------------------------


@pytest.mark.slow
def test_demo_components_explain_the_verdict(demo_pipeline):
    """The README's demo on CPU: the verdict comes with the components that explain it, each with
    its interval and floor; the GPU-side components this machine cannot observe are unresolved."""
    rec = records.read_record(demo_pipeline.demo / "comparison.json", "comparison")
    print("\n" + rec["sentence"])  # shown with -s: what the user reads
    assert rec["schema_version"] == 2
    comps = _by(rec)
    # Whatever this (possibly loaded) machine made of the headline, every resolved component is a
    # Hodges-Lehmann estimate inside its interval, with a floor from the same blocks.
    for r in rec["components"]:
        if r["status"] == "resolved":
            lo, hi = r["interval_ns"]
            if r["reason"] is None:  # enough valid blocks for an interval and a floor
                assert lo <= r["delta_ns_per_step"] <= hi and r["floor_ns"] >= 0, r["name"]
        else:  # what this CPU machine cannot observe is unresolved with the reason, never 0
            assert r["delta_ns_per_step"] is None and r["reason"] and not r["clears_floor"], r["name"]
    wall, wait = comps["wall"], comps["span:queue.wait"]
    assert wall["status"] == wait["status"] == "resolved"
    assert rec["sentence"].startswith(rec["verdict"].replace("_", " "))
    if rec["verdict"] == "faster":
        # The candidate waits for one queued item instead of four: its queue wait, paced by the
        # producer's sleeps, is most of what moved, and the sentence names it with its interval.
        assert wall["delta_ns_per_step"] < 0 and wait["interval_ns"][1] < 0
        if wait["clears_floor"]:
            assert re.search(r"span queue\.wait −[\d.]+ ms/step \[−[\d.]+, −[\d.]+\]", rec["sentence"])
        if wall["clears_floor"]:
            assert wall["share_of_change"] == 1.0 and wait["share_of_change"] >= 0.3


# --- A/A: false component claims ----------------------------------------------------------


@pytest.mark.parametrize("blocks", [20, 6])
def test_aa_false_component_claims_at_most_one_percent(blocks):
    """2,000 simulated A/A experiments, every component with realistic noise of its own (heavy
    tails, outlier runs, clock states, drift, sparse and all-zero components): a component
    clears its floor in at most 1% of components."""
    design = Design(blocks=blocks, runs_per_arm=3, control_runs=3)
    experiments = 2000
    names, d, c, _, _ = B.simulate_components(design, experiments, seed=40 + blocks)
    dec = V.decide(d, c, design.confidence)
    claims = (dec.low_log > dec.floor_log) | (dec.high_log < -dec.floor_log)  # compare_components' rule
    per = claims.mean(axis=0)
    total = int(claims.sum())
    upper = stats.clopper_pearson_upper(total, claims.size, 0.95)
    print(f"\nA/A {blocks} blocks: {total}/{claims.size} component claims ({total / claims.size:.3%}, 95% upper "
          f"{upper:.3%}); per component " + ", ".join(f"{n} {p:.2%}" for n, p in zip(names, per)))
    assert upper <= 0.01
    assert per.max() <= 0.01


def test_same_noise_detects_a_real_component_change():
    """The rule is not merely silent: under the same noise (input wait varies ~15% run to run) a
    20% cut of the input wait (1 ms/step of a 14 ms step) is found in >= 90% of experiments,
    never in the wrong direction, at 20 blocks of 3 runs per arm."""
    design = Design(blocks=20, runs_per_arm=3, control_runs=3)
    names, d, c, _, _ = B.simulate_components(design, 500, seed=9)
    for name in ("check:input_starvation", "wall"):
        d[:, names.index(name)] -= 1.0 * MS  # B = A's distribution shifted: medians shift alike
    dec = V.decide(d, c, design.confidence)
    k = names.index("check:input_starvation")
    found = dec.high_log[:, k] < -dec.floor_log[:, k]
    wrong = dec.low_log[:, k] > dec.floor_log[:, k]
    print(f"\ninput wait -1 ms/step found in {found.mean():.1%}")
    assert found.mean() >= 0.9 and not wrong.any()


def test_record_path_agrees_with_the_vectorized_rule():
    """A few simulated A/A experiments, written as execution records and compared: each
    component's estimate and clears_floor are what the vectorized decide gives for the same values."""
    design, seeds = Design(blocks=6, runs_per_arm=2, control_runs=2), [11, 12, 13, 14]
    names, d, c, values, _ = B.simulate_components(design, len(seeds), seed=3, plan_seeds=seeds)
    dec = V.decide(d, c, design.confidence)
    for e, seed in enumerate(seeds):
        des = cb.design(blocks=6, runs_per_arm=2, control_runs=2, warmup_runs=1, seed=seed)
        sched = cb.plan(des)["schedule"]

        def comp_of(k, arm, i, e=e, sched=sched):
            j = [r["index"] for r in sched[sorted(sched)[k]]].index(i)  # the run's slot in its block
            parts = {n: float(values[n][e, k, j]) for n in B.PARTS}
            return B.components(parts, excess={"input_starvation": float(values["excess:input_starvation"][e, k, j])})

        got = _by(_compare(*B.experiment(des, comp_of)))
        for k, name in enumerate(names):
            want = bool((dec.low_log[e, k] > dec.floor_log[e, k]) | (dec.high_log[e, k] < -dec.floor_log[e, k]))
            assert got[name]["clears_floor"] == want, (e, name)
            assert got[name]["delta_ns_per_step"] == pytest.approx(float(dec.estimate_log[e, k]), rel=1e-9, abs=1e-3)
            assert got[name]["floor_ns"] == pytest.approx(float(dec.floor_log[e, k]), rel=1e-9, abs=1e-3)


def test_deliberate_aa_claims_no_component():
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    means = {"check:input_starvation": 5 * MS, "check:sync_stall": 0.3 * MS, "check:gpu_bound": 8 * MS, "unexplained": 0.2 * MS}
    rec = _compare(*B.experiment(des, _rng_parts(11, lambda arm: means), same_as_baseline=True))
    assert rec["verdict"] == "no_detectable_change"
    assert not any(r["clears_floor"] for r in rec["components"])
    assert all(r["share_of_change"] is None for r in rec["components"])  # nothing changed to share
    assert rec["sentence"].startswith("no detectable change (") and rec["sentence"].endswith("within its floor)") \
        or "no component moved beyond its own A/A floor" in rec["sentence"]


# --- a shift at zero net change ------------------------------------------------------------


def test_time_moved_between_causes_at_zero_net_change():
    """The candidate trades 3 ms/step of input wait for 3 ms/step of sync: the headline sees no
    change, the components show the shift, each beyond its own floor."""
    des = cb.design(blocks=10, runs_per_arm=3, control_runs=3)

    def means(arm):
        moved = 3 * MS if arm == "B" else 0.0
        return {"check:input_starvation": 5 * MS - moved, "check:sync_stall": 0.5 * MS + moved,
                "check:gpu_bound": 8 * MS, "unexplained": 0.2 * MS}

    rec = _compare(*B.experiment(des, _rng_parts(5, means, sd=0.01)))
    assert rec["verdict"] == "no_detectable_change"
    comps = _by(rec)
    wait, sync = comps["check:input_starvation"], comps["check:sync_stall"]
    assert wait["clears_floor"] and wait["interval_ns"][1] < 0 and wait["delta_ns_per_step"] == pytest.approx(-3 * MS, rel=0.05)
    assert sync["clears_floor"] and sync["interval_ns"][0] > 0 and sync["delta_ns_per_step"] == pytest.approx(3 * MS, rel=0.05)
    assert not comps["wall"]["clears_floor"] and not comps["check:gpu_bound"]["clears_floor"]
    assert wait["share_of_change"] is None  # no wall change to take a share of
    s = rec["sentence"]
    assert re.match(r"no detectable change \([+−]\d.*\): ", s), s
    assert re.search(r"input wait −(2\.9|3\.0)\d* ms/step \[−", s) and re.search(r"sync \+(2\.9|3\.0)\d* ms/step \[\+", s), s


# --- the loader fix: own workload, synthetic records built to the contract --------------------


def _loader(arm, remaining_wait=0.3 * MS, moved_to_sync=0.0):
    if arm in ("A", "A'"):
        return {"check:input_starvation": 12 * MS, "check:sync_stall": 0.4 * MS, "check:gpu_bound": 16 * MS,
                "check:host_submission": 0.5 * MS, "unexplained": 0.6 * MS}
    return {"check:input_starvation": remaining_wait, "check:sync_stall": 0.4 * MS + moved_to_sync,
            "check:gpu_bound": 16 * MS, "check:host_submission": 0.5 * MS, "unexplained": 0.6 * MS}


def _loader_comp(seed, **kw):
    base = _rng_parts(seed, lambda arm: _loader(arm, **kw))
    bounds = {"input_starvation": 12 * MS, "host_submission": 0.5 * MS}

    def comp_of(k, arm, i):
        excess = {"input_starvation": 2 * MS} if arm in ("A", "A'") else {}
        return base(k, arm, i, extra={"excess": excess, "bounds": bounds if arm in ("A", "A'") else {}})

    return comp_of


def test_loader_fix_input_wait_explains_the_change():
    """More DataLoader workers: the input-wait component explains >= 80% of the change, and the
    diagnosis's bound for it is met."""
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    rec = _compare(*B.experiment(des, _loader_comp(21)))
    assert rec["verdict"] == "faster"
    comps = _by(rec)
    wait = comps["check:input_starvation"]
    assert wait["clears_floor"] and wait["share_of_change"] >= 0.8
    assert rec["change_explained"]["attributed_share"] >= 0.8
    assert not comps["check:gpu_bound"]["clears_floor"]
    assert comps["excess:input_starvation"]["clears_floor"]  # the slow steps went too
    pred = rec["predictions"][0]
    assert pred["check"] == "input_starvation" and pred["bound_ns_per_step"] == pytest.approx(12 * MS)
    assert pred["outcome"] == "recovered_bound" and pred["recovered_ns_per_step"] == pytest.approx(11.7 * MS, rel=0.03)
    assert rec["sentence"].startswith("faster by ") and ": input wait −11." in rec["sentence"]
    print("\n" + rec["sentence"] + "\n" + pred["note"])


def test_fix_recovers_less_than_the_bound_and_time_moves():
    """An overlapping stall: the fix halves the input wait (less than the bound) and the sync it
    overlapped grows into the freed time: both are named."""
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    rec = _compare(*B.experiment(des, _loader_comp(22, remaining_wait=6 * MS, moved_to_sync=2 * MS)))
    pred = rec["predictions"][0]
    assert pred["outcome"] == "less_than_bound" and pred["moved_to"] == ["check:sync_stall"]
    assert "less than the bound" in pred["note"] and "time moved to sync" in pred["note"]
    lo, hi = _by(rec)["wall"]["interval_ns"]  # 12 - 6 ms of wait gone, 2 ms of it back as sync
    assert lo <= -4 * MS <= hi and pred["wall_recovered_ns_per_step"] == -_by(rec)["wall"]["delta_ns_per_step"]
    host = next(p for p in rec["predictions"] if p["check"] == "host_submission")
    assert host["outcome"] == "cause_unchanged" and host["moved_to"] == [] and "moved" not in host["note"]


# --- missing evidence ------------------------------------------------------------------------


def test_a_run_without_diagnosis_makes_components_unresolved_not_zero():
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    pl, ex, dg, pd = B.experiment(des, _loader_comp(23), no_capture={(2, 5)})
    rec = _compare(pl, ex, dg, pd)
    assert rec["verdict"] == "faster"  # the headline does not need the diagnoses
    for r in rec["components"]:
        assert r["status"] == "unresolved" and r["delta_ns_per_step"] is None and not r["clears_floor"]
        assert "not observed in 1 of" in r["reason"] and "no diagnosis" in r["reason"]
    assert "unresolved" in rec["sentence"] or "no component" in rec["sentence"]


def test_an_unobserved_source_is_unresolved_for_that_component_only():
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    comp = _loader_comp(24)

    def comp_of(k, arm, i):
        c = comp(k, arm, i)
        if k == 3 and arm == "B":
            c["values_ns"]["gpu_busy"] = None
            c["unobserved"]["gpu_busy"] = "busy_ns not observed in 20 of 20 measured steps"
        return c

    comps = _by(_compare(*B.experiment(des, comp_of)))
    assert comps["gpu_busy"]["status"] == "unresolved" and "busy_ns not observed" in comps["gpu_busy"]["reason"]
    assert comps["check:input_starvation"]["status"] == "resolved"


def test_no_components_when_runs_were_not_recorded():
    des = cb.design(blocks=6, runs_per_arm=2, control_runs=2)
    pl = cb.plan(des)
    ex, dg, pd = cb.executions(pl, cb.lognormal_values(1, effect=-0.2))
    rec = _compare(pl, ex, dg, pd)
    assert rec["components"] == [] and rec["predictions"] == []
    assert "no per-run components" in rec["sentence"]


def test_version_1_comparisons_still_read_and_version_2_needs_components():
    from pathlib import Path

    old = records.read_record(Path(__file__).resolve().parent.parent / "docs/examples/h200-demo-comparison.json", "comparison")
    assert old["schema_version"] == 1
    new = dict(old, schema_version=2)
    with pytest.raises(Exception, match="components"):
        records.validate(new, "comparison")


def test_sentence_numbers():
    assert CC.fmt_ns(-12.3e6) == "-12.3 ms" and CC.fmt_ns(950.0) == "950 ns"
    assert CC._signed(-0.04, 1) == "+0.0" and CC._signed(-12.34, 1) == "−12.3"


def test_report_shows_why_it_changed(tmp_path):
    """The report's section: every shown number is the comparison field it names, the sentence
    is there, and the typical steps of A and B are drawn on one scale."""
    from workflow_lib.report import why_changed
    from workflow_lib.report.fmt import esc

    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    from workflow_lib.compare.types import Comparison

    rec = _compare(*B.experiment(des, _loader_comp(25)))
    page = why_changed.section(Comparison.from_json(rec))
    assert esc(rec["sentence"]) in page and "A typical step of A and of B" in page
    import html as H
    import json

    shown = re.findall(r'data-src="comparison:([^"]+)" data-unit="[^"]*" data-v="([^"]*)"', page)
    assert len(shown) >= 6 * len(rec["components"])
    for pointer, value in shown:
        node = rec
        for key in pointer.strip("/").split("/"):
            node = node[int(key)] if isinstance(node, list) else node[key]
        assert json.loads(H.unescape(value)) == node, pointer


def test_describe_prints_components_with_intervals():
    des = cb.design(blocks=8, runs_per_arm=3, control_runs=3)
    from workflow_lib.compare.types import Comparison

    text = CC.describe(Comparison.from_json(_compare(*B.experiment(des, _loader_comp(26)))))
    line = next(x for x in text.splitlines() if x.strip().startswith("check:input_starvation"))
    assert re.search(r"-11\.\d{4} ms/step \[-1\d\.\d{4}, -1\d\.\d{4}\] floor ±0\.\d{4} CLEARS share 9\d\.\d%", line), line


# --- one run's components from a diagnosis built to the contract -----------------------------


def _step(i, wall, wait, *, excess, sync_verdict="attributed"):
    findings = [{"check": "input_starvation", "verdict": "attributed" if wait else "not_applicable", "explains_ns": wait,
                 "evidence": {}, "missing": []},
                {"check": "sync_stall", "verdict": sync_verdict, "explains_ns": 100 if sync_verdict == "attributed" else 0,
                 "evidence": {}, "missing": [] if sync_verdict != "unresolved" else ["host CUDA API calls"]}]
    st = {"step_id": i, "rank": 0, "thread_id": 7, "start_ns": 1000 * i, "end_ns": 1000 * i + wall, "wall_ns": wall,
          "kernel_sum_ns": None, "busy_ns": wall - wait, "idle_ns": wait, "host_api_ns": 50, "host_sync_api_ns": 10,
          "overlap_factor": None, "gaps": {"count": 0, "total_ns": 0, "longest": []}, "findings": findings,
          "explained_ns": wait + (100 if sync_verdict == "attributed" else 0),
          "unexplained_ns": wall - wait - (100 if sync_verdict == "attributed" else 0)}
    if excess is not False:
        st["excess"] = excess
    return st


def test_run_components_read_the_contract():
    from workflow_lib.trials import components as K
    from workflow_lib.trials.types import StepBound

    ex = {"typical_ns": 900, "excess_ns": 300, "by_cause": {"input_starvation": 250}, "unexplained_ns": 50}
    steps = [_step(0, 5000, 4000, excess=None), _step(1, 900, 0, excess=None),  # warm-up, then no reference
             _step(2, 1200, 300, excess=ex), _step(3, 900, 0, excess={**ex, "by_cause": {}, "excess_ns": 0, "unexplained_ns": 0})]
    diag = {"checks": ["input_starvation", "sync_stall"], "steps": steps, "summary": {"steps": 4},
            "next_experiments": [{"rank": 1, "check": "input_starvation", "recoverable_upper_bound_ns": 4300, "steps": 2}]}
    comp = K.run_components(diag, skip_steps=1)
    v = comp.values_ns
    assert comp.steps == 3 and v["wall"] == 1000 and v["check:input_starvation"] == 100
    assert v["check:sync_stall"] == 100 and v["unexplained"] == 800 and v["gpu_busy"] == 900 and v["host_api"] == 50
    assert v["excess:input_starvation"] == 125 and v["excess:unexplained"] == 25  # over the 2 steps with a reference
    assert comp.excess_available and K.value_of(comp, "excess:gpu_work_growth") == (0.0, None)
    # The bound per step over the same 3 measured steps (warm-up step 0's 4000 ns left out, as
    # the components leave it out): 300 / 3, not the all-steps 4300 / 4 (issue 25).
    assert comp.next_experiments == [StepBound(check="input_starvation", bound_ns_per_step=100.0)]
    # Before delay attribution lands (no steps[].excess): excess is not available, never 0.
    for st in steps:
        st.pop("excess")
    comp = K.run_components(diag, skip_steps=1)
    assert not comp.excess_available and K.value_of(comp, "excess:input_starvation")[0] is None
    # A check unresolved in one measured step is unknown for the run.
    steps[2] = _step(2, 1200, 300, excess=False, sync_verdict="unresolved")
    comp = K.run_components(diag, skip_steps=1)
    assert comp.values_ns["check:sync_stall"] is None and "host CUDA API calls" in comp.unobserved["check:sync_stall"]
