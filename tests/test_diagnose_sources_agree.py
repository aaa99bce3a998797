"""CPU twin of the H200 Kineto-vs-recorder check: the same run seen through a Kineto trace and
through recorder-style tables (monotonic clock, CUPTI-like rows) gives the same per-step GPU
busy and kernel sum (within 1%; here exactly, as both come from one synthetic timeline)."""

from pathlib import Path

from tests.builders import api, kernel, make_incident, memcpy, span, step
from benchmarks.kineto_trace import synthetic_trace, write
from workflow_lib.diagnose import DiagnoseOptions, diagnose, diagnose_dir
from workflow_lib.importers.kineto import import_kineto

MONO_SHIFT_NS = 123_456_789  # the recorder's monotonic timeline starts elsewhere


def _recorder_view(doc: dict):
    ns = lambda us: int(round(us * 1000)) + MONO_SHIFT_NS  # noqa: E731
    steps, kernels, copies, calls, spans = [], [], [], [], []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        s, t = ns(e["ts"]), ns(e["ts"]) + int(round(e["dur"] * 1000))
        a = e.get("args", {})
        cat = e["cat"]
        if cat == "kernel":
            kernels.append(kernel(s, t, name=e["name"], stream=a["stream"], corr=a["correlation"]))
        elif cat in ("gpu_memcpy", "gpu_memset"):
            copies.append(memcpy(s, t, kind="memset" if cat == "gpu_memset" else "HtoD", stream=a["stream"]))
        elif cat == "cuda_runtime":
            calls.append(api(s, t, name=e["name"], corr=a.get("correlation"), is_sync=e["name"] == "cudaStreamSynchronize", thread_id=e["tid"]))
        elif cat in ("cpu_op", "user_annotation"):
            if e["name"].startswith("ProfilerStep#"):
                steps.append(step(int(e["name"].split("#")[1]), s, t, thread_id=e["tid"]))
            spans.append(span(e["name"], s, t, thread_id=e["tid"]))
    return make_incident(steps=steps, kernels=kernels, memcpy=copies, runtime_api=calls, spans=spans, producer="recorder")


def test_kineto_and_recorder_views_agree(tmp_path: Path):
    doc = synthetic_trace(steps=8, kernels_per_step=30)
    trace = write(doc, tmp_path / "t.json")
    kin = diagnose_dir(import_kineto([trace], incident_id="k", incidents_dir=tmp_path))
    rec = diagnose(_recorder_view(doc), incident_id="r", snapshot_digest="0" * 64, options=DiagnoseOptions())
    assert len(kin["steps"]) == len(rec["steps"]) == 8
    for a, b in zip(kin["steps"], rec["steps"]):
        for key in ("busy_ns", "kernel_sum_ns"):
            assert abs(a[key] - b[key]) <= 0.01 * b[key], (a["step_id"], key)
        assert a["wall_ns"] == b["wall_ns"]
