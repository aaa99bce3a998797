"""first_call (issue 34, diagnose/first_calls.py): known-truth incidents, both directions.

A trainer runs ten 1 ms-ish steps: five 150 us kernels launched back to back, then, on some
steps, a logging op (`log_norm`, a named host span; it launches one small `reduce` kernel at
its end). On step 6 the op runs for the first time in the recording and pays a one-time cost
(FIRST_US against LATER_US on its later calls): the GPU has drained its five kernels and idles
until the op returns. The rule names that first call and credits its duration less the typical
call on the GPU's idle time inside it. Not named: an op slow every time, a first call not far
over its later calls (or one later call near it), too few later calls, a first call the GPU's
queued work covered, a first call inside a warm-up step. The same on the CUDA-call path (a
launch named with its kernel: the first launch of a kernel loading its module, no op span),
host-only (no GPU activity recorded), and through the Kineto importer (cpu_op rows).
Every diagnosis here is made on both paths and compared (tests/diagnose_crosscheck.py).
"""

from __future__ import annotations

from benchmarks.kineto_trace import _Trace
from benchmarks.kineto_trace import write as write_trace
from tests.builders import api, kernel, make_incident, span, step
from tests.diagnose_crosscheck import crosschecked
from workflow_lib.core.records import validate
from workflow_lib.diagnose import diagnose as _diagnose
from workflow_lib.diagnose.checks import first_call
from workflow_lib.diagnose.types import DiagnoseOptions

US = 1_000
FIRST_US = 5_000
LATER_US = 30
KERNEL_US = 150
OP_AT_US = 200  # the op starts this long after the step's first launch
diagnose = crosschecked(_diagnose)


def _trainer(op_us: dict[int, int], *, kernel_us: int = KERNEL_US, spans: bool = True, kernels: bool = True,
             launch_us: dict[int, int] | None = None):
    """10 steps; `op_us`: step -> the logging op's host time on that step (no op elsewhere);
    `launch_us`: step -> the host time of the `reduce` kernel's launch call (10 us elsewhere)."""
    steps, ks, calls, sp = [], [], [], []
    corr, lo = 0, 0
    for s in range(10):
        t = lo + 20 * US
        gpu = t
        for j in range(5):
            corr += 1
            calls.append(api(t + j * 10 * US, t + j * 10 * US + 5 * US, corr=corr))
            start = max(t + j * 10 * US + 15 * US, gpu)
            ks.append(kernel(start, start + kernel_us * US, corr=corr))
            gpu = start + kernel_us * US
        end = gpu
        if s in op_us:
            a = t + OP_AT_US * US
            b = a + op_us[s] * US
            corr += 1
            ln = (launch_us or {}).get(s, 10)
            calls.append(api(b - ln * US, b, corr=corr))
            k0 = max(b + 5 * US, gpu)
            ks.append(kernel(k0, k0 + 20 * US, name="reduce", corr=corr))
            if spans:
                sp.append(span("log_norm", a - 1 * US, b + 1 * US))
            end = max(end, k0 + 20 * US, b + 1 * US)
        end += 50 * US
        steps.append(step(s, lo, end))
        lo = end
    tables = {"runtime_api": calls}
    if kernels:
        tables["kernels"] = ks
    if spans:
        tables["spans"] = sp
    return make_incident(steps=steps, **tables)


def _run(inc, **opts):
    rec = diagnose(inc, incident_id="t", snapshot_digest="0" * 64, options=DiagnoseOptions(**opts) if opts else None)
    validate(rec, "diagnosis")
    for s in rec["steps"]:
        assert sum(f["explains_ns"] for f in s["findings"]) == s["explained_ns"] <= s["wall_ns"]
    return rec, {s["step_id"]: s for s in rec["steps"]}


def _f(steps, sid, check="first_call"):
    return next(f for f in steps[sid]["findings"] if f["check"] == check)


def _named(steps) -> dict[int, int]:
    return {sid: _f(steps, sid)["explains_ns"] for sid in steps if _f(steps, sid)["verdict"] == "attributed"}


LATER = {7: LATER_US, 8: LATER_US, 9: LATER_US}


def test_a_one_time_first_call_is_named_with_its_cost_less_the_typical_call():
    rec, steps = _run(_trainer({6: FIRST_US, **LATER}))
    f = _f(steps, 6)
    # The GPU ran its five kernels (launched from t, 150 us each back to back, the first 15 us
    # after its launch) and idled from then until the op returned: the op's idle, less nothing
    # (its one-time budget, FIRST_US - LATER_US + 2 us of span edges, is larger).
    gpu_done = 15 + 5 * KERNEL_US
    assert f["verdict"] == "attributed"
    idle_in_op = (OP_AT_US - 1 + FIRST_US + 2) - gpu_done  # from the GPU's last kernel end to the span's end
    assert _named(steps) == {6: idle_in_op * US}
    one = f["evidence"]["by_name"]["log_norm"]
    assert one["first_ns"] == (FIRST_US + 2) * US and one["typical_ns"] == (LATER_US + 2) * US and one["later_calls"] == 3
    assert one["one_time_ns"] == (FIRST_US - LATER_US) * US and one["critical_ns"] == idle_in_op * US
    assert f["evidence"]["once"] and "this recording" in f["evidence"]["first_in"] and "warm the op up" in f["evidence"]["fix"]
    # Once, never a per-step lever: not ranked, and the step's excess is first_call's.
    assert all(e["check"] != "first_call" for e in rec["next_experiments"])
    assert steps[6]["excess"]["by_cause"].get("first_call", 0) > 0.9 * steps[6]["excess"]["excess_ns"]
    assert set(rec["checks"]) >= {"first_call"} and rec["options"]["first_call_factor"] == 10.0


def test_an_op_slow_every_time_or_not_far_over_its_later_calls_is_not_named():
    _, every = _run(_trainer({6: FIRST_US, 7: FIRST_US, 8: FIRST_US, 9: FIRST_US}))
    assert _named(every) == {}
    _, close = _run(_trainer({6: FIRST_US, 7: FIRST_US // 5, 8: FIRST_US // 5, 9: FIRST_US // 5}))  # 5x, under 10x
    assert _named(close) == {}
    # 10x over the median, but one later call longer than half of it: a length that recurs.
    _, recurs = _run(_trainer({6: FIRST_US, 7: LATER_US, 8: FIRST_US * 6 // 10, 9: LATER_US}))
    assert _named(recurs) == {}
    assert _named(_run(_trainer({6: FIRST_US, 7: LATER_US, 8: FIRST_US * 4 // 10, 9: LATER_US}))[1]) != {}


def test_too_few_later_calls_or_too_small_a_cost_is_not_named():
    _, two = _run(_trainer({6: FIRST_US, 7: LATER_US, 8: LATER_US}))
    assert _named(two) == {}
    assert _f(two, 6)["verdict"] == "not_applicable"
    _, small = _run(_trainer({6: 900, **LATER}))  # 30x its later calls, but under first_call_min_ns (1 ms)
    assert _named(small) == {}
    assert _named(_run(_trainer({6: 900, **LATER}), first_call_min_ns=500 * US)[1]) != {}


def test_a_first_call_the_queued_work_covered_is_not_named():
    # Kernels of 2 ms each: the GPU is busy through the whole op.
    _, steps = _run(_trainer({6: 1_500, **LATER}, kernel_us=2_000))
    f = _f(steps, 6)
    assert f["verdict"] == "not_applicable" and "queued work hid it" in f["evidence"]["note"]
    assert f["evidence"]["by_name"]["log_norm"]["one_time_ns"] > 1_000 * US


def test_a_first_call_in_a_warm_up_step_is_warm_ups():
    _, steps = _run(_trainer({0: FIRST_US, 7: LATER_US, 8: LATER_US, 9: LATER_US}))
    assert _f(steps, 0, "warm_up")["verdict"] == "attributed"
    assert _f(steps, 0)["verdict"] == "not_applicable" and _named(steps) == {}


def test_the_first_launch_of_a_kernel_is_named_from_the_cuda_calls():
    """No op span (a recorder capture in a GPU window): the launch call keyed with its kernel."""
    launch = {6: 3_000, 7: 10, 8: 10, 9: 10}
    _, steps = _run(_trainer({6: 3_010, 7: 10, 8: 10, 9: 10}, spans=False, launch_us=launch))
    f = _f(steps, 6)
    assert f["verdict"] == "attributed" and list(f["evidence"]["by_name"]) == ["cudaLaunchKernel (reduce)"]
    assert f["evidence"]["by_name"]["cudaLaunchKernel (reduce)"]["source"] == "CUDA runtime call"
    assert set(_named(steps)) == {6}
    # The five gemm launches of every step share one key: their first is no slower than the rest.
    _, plain = _run(_trainer({6: 10, 7: 10, 8: 10, 9: 10}, spans=False))
    assert _named(plain) == {}


def test_host_only_the_first_call_is_its_own_time_over_the_typical_call():
    _, steps = _run(_trainer({6: FIRST_US, **LATER}, kernels=False))
    f = _f(steps, 6)
    assert f["verdict"] == "attributed" and f["evidence"]["basis"].startswith("host-only")
    assert f["explains_ns"] == (FIRST_US - LATER_US) * US and set(_named(steps)) == {6}


def _kineto(tmp_path, op_us: dict[int, float]):
    """The same trainer as a Kineto trace (cpu_op rows), imported as users import theirs."""
    from workflow_lib.core.incident import read_incident
    from workflow_lib.importers.kineto import import_kineto

    tr = _Trace("new", 4242, 4242, device=0, t0_us=0.0)
    host = gpu = 200.0
    for s in range(10):
        start = host
        for _ in range(5):
            gpu = tr.launch(host, max(gpu, host), "gemm", KERNEL_US)
            host += 10.0
        if s in op_us:
            a = host + 50.0
            tr.x("op", "aten::linalg_vector_norm", a, op_us[s])
            gpu = tr.launch(a + op_us[s] - 8.0, gpu, "reduce_kernel", 20.0)
            host = a + op_us[s]
        host = max(host, gpu) + 20.0
        tr.x("annotation", f"ProfilerStep#{s}", start, host - start)
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000}],
           "traceEvents": tr.events, "traceName": "t.json", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1_764_460_800_000_000_000}
    tmp_path.mkdir(parents=True)
    path = write_trace(doc, tmp_path / "t.json")
    return read_incident(import_kineto([path], incident_id="k", incidents_dir=tmp_path / "inc"))


def test_kineto_import_names_the_first_call_of_an_op(tmp_path):
    rec, steps = _run(_kineto(tmp_path / "a", {6: 5_000.0, 7: 30.0, 8: 30.0, 9: 30.0}))
    f = _f(steps, 6)
    assert f["verdict"] == "attributed" and list(f["evidence"]["by_name"]) == ["aten::linalg_vector_norm"]
    assert set(_named(steps)) == {6} and 4_000 * US < f["explains_ns"] <= (5_000 - 30) * US
    _, every = _run(_kineto(tmp_path / "b", {6: 5_000.0, 7: 5_000.0, 8: 5_000.0, 9: 5_000.0}))
    assert _named(every) == {}


def test_the_check_is_documented_and_ordered():
    from workflow_lib.diagnose.checks import NAMES

    assert NAMES.index("first_call") == NAMES.index("checkpoint_stall") + 1 < NAMES.index("sync_stall")
    assert "warm the op up" in first_call.FIX
