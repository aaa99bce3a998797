"""Traces as users have them: every real trace written by others (tests/fixtures/real_traces,
see PROVENANCE.md) imports and diagnoses with no per-trace flags."""

import json
from pathlib import Path

import pytest

from workflow_lib.diagnose import diagnose_dir
from workflow_lib.importers.kineto import import_kineto
from workflow_lib.core.incident import read_incident
from workflow_lib.core.records import validate

DIR = Path(__file__).parent / "fixtures" / "real_traces"
TRACES = sorted(p.name for p in DIR.iterdir())


def test_the_set_is_there():
    assert len(TRACES) >= 12


@pytest.mark.parametrize("name", TRACES)
def test_imports_and_diagnoses_without_flags(name, tmp_path):
    inc = import_kineto([DIR / name], incident_id="t", incidents_dir=tmp_path)
    rec = diagnose_dir(inc)
    validate(rec, "diagnosis")
    assert rec["steps"]
    for s in rec["steps"]:
        assert 0 <= s["explained_ns"] <= s["wall_ns"]
        assert sum(f["explains_ns"] for f in s["findings"]) == s["explained_ns"]
    m = read_incident(inc).manifest
    assert m["sources"]["steps"]["detail"]["basis"]
    for src in ("kernels", "runtime_api", "spans"):
        s = m["sources"][src]
        assert s["status"] == "observed" or s["reason"]


def test_rocm_trace_reads_hip_blocking_calls(tmp_path):
    inc = read_incident(import_kineto([DIR / "hta_amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"], incident_id="t",
                                      incidents_dir=tmp_path))
    rt = inc.table("runtime_api").to_pylist()
    syncs = {r["name"] for r in rt if r["is_sync"]}
    assert syncs and all(n.startswith("hip") for n in syncs)
    rec = diagnose_dir(inc.path)
    verdicts = {f["verdict"] for s in rec["steps"] for f in s["findings"] if f["check"] == "sync_stall"}
    assert "attributed" in verdicts


def test_trace_without_profiler_steps_is_diagnosed_over_its_window(tmp_path):
    inc = import_kineto([DIR / "hta_critical_path_alexnet_trace.json.gz"], incident_id="t", incidents_dir=tmp_path)
    m = read_incident(inc).manifest
    assert "window" in m["sources"]["steps"]["detail"]["basis"] or "annotation" in m["sources"]["steps"]["detail"]["basis"]
    assert diagnose_dir(inc)["summary"]["steps"] >= 1


def test_cpu_only_and_other_device_kinds_say_gpu_not_observed(tmp_path):
    for i, name in enumerate(("hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
                              "hta_mtia_inference_trace_mtia_inference_rank_0.json.gz")):
        m = read_incident(import_kineto([DIR / name], incident_id=f"t{i}", incidents_dir=tmp_path)).manifest
        assert m["sources"]["kernels"]["status"] == "not_observed"
        assert "MTIA" in m["sources"]["kernels"]["reason"]


def test_chrome_json_array_format(tmp_path):
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": 100.0 * i, "dur": 90.0}
              for i in range(4)]
    events += [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100.0 * i + 10, "dur": 50.0,
                "args": {"device": 0, "stream": 7}} for i in range(4)]
    p = tmp_path / "array.json"
    p.write_text(json.dumps(events))
    rec = diagnose_dir(import_kineto([p], incident_id="a", incidents_dir=tmp_path))
    assert rec["summary"]["steps"] == 4
    # the closing bracket is optional in the array format
    q = tmp_path / "open.json"
    q.write_text(json.dumps(events)[:-1] + ",\n")
    assert diagnose_dir(import_kineto([q], incident_id="b", incidents_dir=tmp_path))["summary"]["steps"] == 4


def test_gpu_work_after_the_host_end_counts_toward_the_launching_step(tmp_path):
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0, "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20.0, "dur": 500.0, "args": {"device": 0, "stream": 7, "correlation": 1}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 5.0, "args": {"correlation": 2}},
          {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1020.0, "dur": 400.0, "args": {"device": 0, "stream": 7, "correlation": 2}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    st = read_incident(import_kineto([p], incident_id="g", incidents_dir=tmp_path)).table("steps").to_pylist()
    assert [s["end_ns"] - s["start_ns"] for s in st] == [520_000, 420_000]
