"""Excess attribution on synthetic timelines with known answers: typical reference, the split
of a slow step's excess by cause (time-split, overlap-free), share_of_excess, slow_steps."""

from tests.builders import api, clock, kernel, make_incident, sched, span, step
from workflow_lib.commands.diagnose import slow_step_lines
from workflow_lib.diagnose import DiagnoseOptions, diagnose
from workflow_lib.core.records import validate

MS = 1_000_000
DIGEST = "0" * 64


def _steps(n, slow=None):
    """n steps of 10 ms: kernel [0, 6) ms launched at 0, host in 'fwd' [6, 9.9) ms, kernel
    [9.9, 10) launched at 9.89 ms. slow: {step: extra} where extra is one of
    'sync_then_wait' (a 3 ms sync then a 7 ms data wait), 'gpu' (+8 ms kernel), 'contention'."""
    slow = slow or {}
    rows = {k: [] for k in ("steps", "kernels", "runtime_api", "spans", "sched")}
    t, corr = 0, 0
    for i in range(n):
        kind = slow.get(i)
        a = t
        rows["kernels"].append(kernel(a, a + 6 * MS, corr=corr)); rows["runtime_api"].append(api(a, a + 5_000, corr=corr)); corr += 1
        h = a + 6 * MS
        if kind == "gpu":
            rows["kernels"].append(kernel(h, h + 8 * MS, name="extra_gemm", corr=corr))
            rows["runtime_api"].append(api(a + 10_000, a + 15_000, corr=corr)); corr += 1
            h += 8 * MS
        host = 3_900_000 + (10 * MS if kind == "contention" else 0)
        rows["spans"].append(span("fwd", h, h + host))
        h += host
        if kind == "sync_then_wait":
            rows["runtime_api"].append(api(h, h + 3 * MS, name="cudaStreamSynchronize", is_sync=True))
            rows["spans"].append(span("data.load_batch", h + 3 * MS, h + 10 * MS))
            h += 10 * MS
        rows["kernels"].append(kernel(h, h + 100_000, corr=corr)); rows["runtime_api"].append(api(h - 10_000, h - 5_000, corr=corr)); corr += 1
        e = h + 100_000
        rq = 9 * MS if kind == "contention" else 10_000
        rows["sched"] += [sched(a, cpu_time_ns=a, runqueue_wait_ns=i * 10 * MS), sched(e, cpu_time_ns=e - rq, runqueue_wait_ns=i * 10 * MS + rq)]
        rows["steps"].append(step(i, a, e))
        t = e
    return make_incident(clock_sync=[clock(0, 1_000)], **rows)


def _run(inc):
    rec = diagnose(inc, incident_id="t", snapshot_digest=DIGEST, options=DiagnoseOptions())
    validate(rec, "diagnosis")
    return rec


def test_warmup_has_no_reference_and_typical_is_the_median_of_the_rest():
    rec = _run(_steps(10, {7: "gpu"}))
    assert [s["excess"] for s in rec["steps"][:2]] == [None, None]
    assert all(s["excess"]["typical_ns"] == 10 * MS for s in rec["steps"][2:])
    normal = [s for s in rec["steps"][2:] if s["step_id"] != 7]
    assert all(s["excess"]["excess_ns"] == 0 and s["excess"]["by_cause"] == {} for s in normal)


def test_gpu_work_growth_names_the_kernel_that_grew():
    rec = _run(_steps(10, {7: "gpu"}))
    x = rec["steps"][7]["excess"]
    assert x["excess_ns"] == 8 * MS
    assert x["by_cause"] == {"gpu_work_growth": 8 * MS} and x["unexplained_ns"] == 0
    (slow,) = rec["summary"]["slow_steps"]
    assert slow["step_id"] == 7 and slow["grew"]["kernels_ns"] == {"extra_gemm": 8 * MS}
    shares = {f["check"]: f["share_of_excess"] for f in rec["steps"][7]["findings"]}
    assert shares["gpu_work"] == 1.0 or shares["gpu_bound"] == 1.0


def test_sync_followed_by_data_wait_is_split_by_time():
    # Issue 14: a sync followed by a 7 ms data wait used to be credited all to sync_stall.
    rec = _run(_steps(10, {6: "sync_then_wait"}))
    x = rec["steps"][6]["excess"]
    assert x["excess_ns"] == 10 * MS
    assert x["by_cause"] == {"sync_stall": 3 * MS, "input_starvation": 7 * MS}
    assert slow_step_lines(rec)[1].startswith("  step 6: 20.000 ms vs typical 10.000 ms (+10.000 ms): input_starvation 7.000 ms (70%)")


def test_cpu_contention_from_step_boundary_run_queue_wait():
    rec = _run(_steps(10, {5: "contention"}))
    f = next(f for f in rec["steps"][5]["findings"] if f["check"] == "cpu_contention")
    assert f["verdict"] == "attributed" and f["evidence"]["sentence"] == "runnable, not running: 9.000 ms"
    x = rec["steps"][5]["excess"]
    assert x["by_cause"]["cpu_contention"] == 9 * MS
    assert x["by_cause"].get("host_submission", 0) == 1 * MS
    # normal steps: 10 us of run-queue wait is noise, not contention
    assert all(next(f for f in s["findings"] if f["check"] == "cpu_contention")["verdict"] == "not_applicable"
               for s in rec["steps"] if s["step_id"] != 5)


def test_normal_steps_are_explained():
    rec = _run(_steps(10))
    for s in rec["steps"]:
        assert s["explained_ns"] >= 0.98 * s["wall_ns"], s["step_id"]
