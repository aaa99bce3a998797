"""The trial schedule: reproducible, balanced, independent per block, fast at scale."""

from __future__ import annotations

import time
from pathlib import Path
from collections import Counter

import numpy as np
import pytest

from workflow_lib.core import records
from workflow_lib.core.errors import RecordError
from workflow_lib.plan.schedule import block_arms, make_schedule

from benchmarks.compare_builders import design, plan


def test_same_design_same_schedule():
    assert make_schedule(design(seed=11)) == make_schedule(design(seed=11))


def test_different_seed_different_schedule():
    assert make_schedule(design(blocks=10, seed=1)) != make_schedule(design(blocks=10, seed=2))


@pytest.mark.parametrize("n,m,w", [(1, 0, 0), (3, 3, 1), (5, 2, 2), (2, 5, 0), (4, 4, 3)])
def test_counts_indices_and_warmups_first(n, m, w):
    sched = make_schedule(design(blocks=4, runs_per_arm=n, control_runs=m, warmup_runs=w))
    for runs in sched.values():
        assert [r["index"] for r in runs] == list(range(len(runs)))
        arms = [r["arm"] for r in runs]
        assert arms[:2 * w] == ["warmup"] * 2 * w and "warmup" not in arms[2 * w:]
        assert [r["warms"] for r in runs[:2 * w]] == ["A", "B"] * w  # each arm warms its own work dir
        assert Counter(arms[2 * w:]) == Counter({"A": n, "B": n, "A'": m}) - Counter()


def test_block_is_reproducible_on_its_own():
    # Block k depends only on (seed, k): growing the design never reshuffles earlier blocks.
    small, big = make_schedule(design(blocks=3, seed=5)), make_schedule(design(blocks=50, seed=5))
    assert all(big[b] == small[b] for b in small)


def test_blocks_differ_from_each_other():
    sched = make_schedule(design(blocks=40, runs_per_arm=4, control_runs=4))
    orders = {tuple(r["arm"] for r in runs) for runs in sched.values()}
    assert len(orders) > 20


def test_mirrored_rounds_cancel_linear_drift():
    # With an even number of rounds, every arm's mean position is the same in every block.
    sched = make_schedule(design(blocks=30, runs_per_arm=4, control_runs=4, warmup_runs=1))
    for runs in sched.values():
        pos = {arm: np.mean([r["index"] for r in runs if r["arm"] == arm]) for arm in ("A", "B", "A'")}
        assert pos["A"] == pos["B"] == pos["A'"]


def test_a_and_b_are_exchangeable():
    # Over many blocks, A comes before B in the first round as often as after (the
    # symmetry that makes the signed-rank inference exact under no change).
    sched = make_schedule(design(blocks=2000, runs_per_arm=1, control_runs=1, warmup_runs=0, seed=3))
    a_first = sum(next(r["arm"] for r in runs if r["arm"] in ("A", "B")) == "A" for runs in sched.values())
    assert 900 < a_first < 1100


def test_plan_with_schedule_validates():
    records.validate(plan(design(blocks=12)), "plan")


def test_block_ids_keep_sorting_past_999():
    sched = make_schedule(design(blocks=1001, runs_per_arm=1, control_runs=0, warmup_runs=0))
    ids = list(sched)
    assert ids[0] == "b000" and ids[-1] == "b1000" and len(set(ids)) == 1001


def test_two_hundred_blocks_are_fast():
    t0 = time.perf_counter()
    sched = make_schedule(design(blocks=200, runs_per_arm=5, control_runs=5, warmup_runs=2))
    assert len(sched) == 200
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("bad", [{"blocks": 0}, {"runs_per_arm": 0}, {"control_runs": -1}, {"seed": "x"}])
def test_bad_design_is_one_line_error(bad):
    with pytest.raises(RecordError, match="plan design"):
        make_schedule({**design(), **bad})


def test_missing_field_named():
    des = design()
    del des["seed"]
    with pytest.raises(RecordError, match="seed"):
        make_schedule(des)


def test_block_arms_without_controls_alternates_pairs():
    rng = np.random.Generator(np.random.PCG64(0))
    arms = block_arms(4, 0, 0, rng)
    # rounds of two, mirrored in pairs: AB BA or BA AB
    assert arms[0:2] == arms[2:4][::-1] and arms[4:6] == arms[6:8][::-1]


def test_block_ids_are_defined_once_and_recognised():
    from workflow_lib.plan.schedule import block_id, is_block_id

    assert [block_id(i) for i in (0, 7, 999, 1000)] == ["b000", "b007", "b999", "b1000"]
    assert all(is_block_id(block_id(i)) for i in (0, 7, 999, 1000))
    assert not any(is_block_id(n) for n in ("b1", "b07", "backup", "b000.tmp", "B000", ""))
    rules = (Path(__file__).resolve().parents[1] / "rules" / "common.smk").read_text()
    assert "block_id(i)" in rules and ':03d}' not in rules


def test_the_report_reads_only_block_records(tmp_path):
    from workflow_lib.report.build import _per_block

    (tmp_path / "backup.json").write_text("not a record")
    assert _per_block(tmp_path, "preflight") == {}
