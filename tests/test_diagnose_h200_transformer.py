"""The H200 transformer incidents (examples/gpu/capture_transformer_incidents.py: a 4-layer
transformer trained from a real DataLoader, six causes injected at known steps, recorder and
Kineto forms; tests/fixtures/PROVENANCE.md): the CPU twin of the GPU run, over the fixtures.

Targets (issue 14), scored by tests/transformer_scoring.py:
  * every injected step >= 1.5x typical has >= 80% of its excess explained by the right
    cause (>= 10% for blocking syncs, whose refill cost is shared);
  * normal steps are explained, median >= 80% of wall;
  * 0 false attributions on normal steps.
Targets not met on this capture are marked xfail(strict) with the measured numbers: they are
not loosened, and a capture or diagnosis that meets them turns the xfail into a failure to
be updated."""

import json
from pathlib import Path

import pytest

from tests.transformer_scoring import score
from workflow_lib.diagnose import diagnose_dir

FIX = Path(__file__).parent / "fixtures" / "h200_transformer"
FORMS = {"recorder": "transformer", "kineto": "transformer-kineto"}
CAUSES = ("cpu_contention", "gpu_work_growth", "host_work", "slow_loader", "blocking_sync", "allocator_churn")
# Measured on the committed capture (2026-12-01, H200): the slow injected steps below 80% (reasons
# re-measured 2026-12-04).
NOT_MET = {
    ("recorder", "cpu_contention"): "step 8: 76% (cpu_contention 8.2 ms, input_starvation 2.6 ms of +10.8 ms): the "
                                    "training thread's whole measured run-queue wait (11.6 ms) is placed; its loader "
                                    "wait (data.next_batch 3.81 ms vs 0.07 ms on steps 7 and 9) holds no scheduler "
                                    "sample, so whether it waited for the batch or for a CPU cannot be read",
    ("kineto", "cpu_contention"): "steps 8: 38%, 11: 74%: Kineto has no scheduler samples, host time with its state open",
    ("kineto", "allocator_churn"): "step 58: 55% (allocator_churn 7.7 ms, host_submission 6.2 ms of +13.9 ms): the "
                                   "49 allocator calls take 6.6 ms; forward ran 12.44 ms outside them against "
                                   "7.75-8.22 ms on steps 54-57, 59 and 62-63 (59, the same injection, 8.22): host "
                                   "time no allocator call holds, once, on the first churned step; Kineto has no "
                                   "scheduler samples to say what held it",
}


@pytest.fixture(scope="module")
def truth():
    return json.loads((FIX / "truth.json").read_text())


_CACHE: dict = {}


def _scored(form, truth):
    if form not in _CACHE:
        _CACHE[form] = score(diagnose_dir(FIX / FORMS[form]), truth, form)
    return _CACHE[form]


def test_every_cause_was_injected(truth):
    assert set(truth["injected"]) == set(CAUSES)
    assert all(len(v) == 4 for v in truth["injected"].values())


@pytest.mark.parametrize("form", sorted(FORMS))
def test_normal_steps_explained_median_at_least_80_percent(form, truth):
    assert _scored(form, truth)["normal_explained_median"] >= 0.8


@pytest.mark.parametrize("form", sorted(FORMS))
def test_no_false_attributions_on_normal_steps(form, truth):
    assert _scored(form, truth)["false_attributions"] == []


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("cause", CAUSES)
def test_slow_injected_steps_explained_by_the_right_cause(form, cause, truth, request):
    if (form, cause) in NOT_MET:
        request.applymarker(pytest.mark.xfail(strict=True, reason="target not met: " + NOT_MET[(form, cause)]))
    need = 0.1 if cause == "blocking_sync" else 0.8
    rows = [r for r in _scored(form, truth)["injected"].values() if r["cause"] == cause and r["slow"]]
    assert all(r["right_share"] >= need for r in rows), [(r["wall_ms"], r["right_share"], r["by_cause"]) for r in rows]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_injected_steps_that_got_slower_name_their_cause_first(form, truth):
    # Beyond the target: an injected step at least 15% over typical, slow or not, has the
    # right cause as its largest.
    for i, r in _scored(form, truth)["injected"].items():
        x = r["by_cause"]
        if (r["wall_ms"] - r["typical_ms"]) >= 0.15 * r["typical_ms"] and x:
            assert max(x, key=x.get) in truth["accepted_causes"][r["cause"]][form], (i, r)


def test_slow_causes_on_this_capture(truth):
    # Which injections made steps >= 1.5x typical on this capture (the others hid in a
    # host-bound step: e.g. 8 extra 8192^2 matmuls ran while the GPU would have idled).
    slow = {r["cause"] for r in _scored("recorder", truth)["injected"].values() if r["slow"]}
    assert {"cpu_contention", "host_work", "slow_loader"} <= slow
