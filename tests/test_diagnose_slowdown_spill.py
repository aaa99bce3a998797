"""A kernel slowed past its step's end (issue 34, checks/kernel_slowdown.py): its extra time (the
last `duration - typical` ns) is claimed in whichever step it falls, so the next step, whose
own work waited behind it, has the spilled part as kernel_slowdown, not as its own GPU work.
Constructed truth: each step launches one 600 us kernel then a 100 us kernel queued behind it;
on step 6 the first kernel runs 3 ms (another process time-slicing the GPU, say), ending 1.9 ms
into step 7. Both directions: a kernel of its usual length that runs past its step's end (the
host simply started the next step early) spills nothing: no kernel_slowdown in the next step."""

from __future__ import annotations

from tests import reference_diagnosis
from tests.builders import api, clock, kernel, make_incident, step
from tests.diagnose_crosscheck import assert_same
from tests.test_diagnose_consequence import MS, US, finding
from tests.test_diagnose_consequence import run as run_engine

SLOW = 6


def run(inc):
    rec = run_engine(inc)
    assert_same(reference_diagnosis.diagnose(inc, incident_id="t", snapshot_digest="0" * 64), rec)
    return rec


def trainer(slow_us: int, step_us: int = 1_000, n: int = 12):
    """Steps of `step_us` wall; each launches a 600 us `gemm` (on step SLOW: `slow_us`) and a 100 us
    `add` behind it on one stream; the GPU's queue carries what runs past a step's end."""
    steps, kernels, rt = [], [], []
    gpu_free, corr = 0, 1
    for i in range(n):
        t0 = i * step_us * US
        steps.append(step(i, t0, t0 + step_us * US))
        for name, us in (("gemm", slow_us if i == SLOW else 600), ("add", 100)):
            rt.append(api(t0 + corr % 2 * 10 * US, t0 + corr % 2 * 10 * US + 5 * US, corr=corr))
            ks = max(t0 + 20 * US, gpu_free)
            kernels.append(kernel(ks, ks + us * US, name=name, corr=corr))
            gpu_free, corr = ks + us * US, corr + 1
    return make_incident(steps=steps, kernels=kernels, runtime_api=rt, clock_sync=[clock(0, 1 * US)])


def test_a_kernel_slowed_past_its_step_end_is_slowdown_in_the_next_step_too():
    rec = run(trainer(slow_us=3_000))
    # The gemm of step 6 runs [6.02, 9.02] ms: its extra (2.4 ms past 600 us) is [6.62, 9.02] ms,
    # 0.38 ms of it in step 6, 1 ms in step 7 and 1 ms in step 8 (which it covers whole).
    f6, f7, f8 = (finding(rec, "kernel_slowdown", s) for s in (6, 7, 8))
    assert f6["explains_ns"] == 380 * US
    assert f7["explains_ns"] == 1 * MS and f7["evidence"]["slower_kernels_from_before"] == 1
    assert f8["explains_ns"] == 1 * MS
    for s in (7, 8):  # none of the spilled time is the step's own GPU work
        assert finding(rec, "gpu_work", s)["explains_ns"] == 0
    # The steps after the queue drained are normal.
    assert finding(rec, "kernel_slowdown", 10)["verdict"] == "not_applicable"


def test_a_kernel_of_usual_length_running_past_its_step_spills_nothing():
    """Every gemm ends 0.2 ms past its 0.5 ms step (the host runs ahead): each step's GPU work
    runs into the next, none slower than usual, so no step has kernel_slowdown."""
    rec = run(trainer(slow_us=600, step_us=500))
    for s in rec["steps"]:
        f = next(f for f in s["findings"] if f["check"] == "kernel_slowdown")
        assert f["verdict"] == "not_applicable", (s["step_id"], f)
