"""The vectorized CUPTI buffer path: records grouped by kind in C, query-only runtime calls
left out (at CUPTI when the binding can, else at ingest), sync records joined to their call
across buffers, optional launch geometry, unknown copy kinds. The binding is substituted."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from workflow_lib.capture.sources import cupti as cupti_mod
from workflow_lib.capture.sources.cupti import DROPPED_RUNTIME_CALLS, CuptiSource
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder
from benchmarks.fake_cupti import CUPTI_BASE_NS, ActivityKind, FakeCupti, FakeCuptiNoFilter, cbid  # noqa: F401


class FakeCuptiFull(FakeCupti):
    runtime_api_trace_cbid = cbid

    def __init__(self, fail=()):
        super().__init__(fail)
        self.runtime_api_calls = []

    def activity_enable_runtime_api(self, cb, enable):
        self._check("activity_enable_runtime_api")
        self.runtime_api_calls.append((cb, enable))


def _api(cb, i, t0, tid=4242):
    return SimpleNamespace(kind=ActivityKind.RUNTIME, cbid=int(cb), thread_id=tid, correlation_id=1000 + i,
                           start=t0 + i * 100, end=t0 + i * 100 + 50)


def _kernel(i, t0, geometry=True):
    k = SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL, name=f"k{(i // 3) % 3}", device_id=0, stream_id=7,
                        correlation_id=1000 + i, start=t0 + i * 100 + 60, end=t0 + i * 100 + 80)
    if geometry:
        k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z = 4, 1, 1, 32, 1, 1
    return k


def _launch_loop(t0, n):
    """What a launch-bound PyTorch loop yields per kernel: launch, error check, device query."""
    out = []
    for i in range(n):
        out += [_api(cbid.cudaGetDevice_v3020, 3 * i, t0), _api(cbid.cudaLaunchKernel_v7000, 3 * i + 1, t0),
                _kernel(3 * i + 1, t0), _api(cbid.cudaGetLastError_v3020, 3 * i + 2, t0)]
    return out


def test_query_calls_left_out_at_ingest_when_binding_cannot(tmp_path, monkeypatch):
    fake = FakeCuptiNoFilter()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        t0 = time.monotonic_ns() + CUPTI_BASE_NS
        fake.completed(_launch_loop(t0, 50) + [_api(cbid.cudaEventQuery_v3020, 900, t0),
                                                _api(cbid.cudaGetDeviceProperties_v2_v12000, 901, t0)])
        path = rec.snapshot("manual")
    inc = read_incident(path)
    api = inc.table("runtime_api").to_pandas()
    assert sorted(set(api["name"])) == ["cudaEventQuery_v3020", "cudaLaunchKernel_v7000"]
    assert (api["name"] == "cudaLaunchKernel_v7000").sum() == 50
    d = inc.manifest["sources"]["cupti"]["detail"]
    assert d["runtime_calls_dropped_at_ingest"] == 101 and d["runtime_calls_left_out_at"] == "ingest"
    assert d["runtime_calls_left_out"] == sorted(DROPPED_RUNTIME_CALLS)
    # Every kernel still joins its launch call.
    k = inc.table("kernels").to_pandas()
    assert len(k) == 50 and set(k["correlation_id"]) <= set(api["correlation_id"])


def test_query_calls_disabled_at_cupti_when_binding_can(tmp_path, monkeypatch):
    fake = FakeCuptiFull()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        path = rec.snapshot("manual")
    assert sorted(fake.runtime_api_calls) == sorted((int(c), 0) for c in (
        cbid.cudaGetDevice_v3020, cbid.cudaGetLastError_v3020, cbid.cudaGetDeviceProperties_v2_v12000))
    d = read_incident(path).manifest["sources"]["cupti"]
    assert d["status"] == "observed" and d["detail"]["runtime_calls_left_out_at"] == "cupti"


def test_runtime_filter_failure_is_a_note_not_an_outage(tmp_path, monkeypatch):
    fake = FakeCuptiFull(fail={"activity_enable_runtime_api"})
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        fake.completed(_launch_loop(time.monotonic_ns() + CUPTI_BASE_NS, 3))
        path = rec.snapshot("manual")
    d = read_incident(path).manifest["sources"]["cupti"]
    assert d["status"] == "observed"
    assert d["detail"]["runtime_calls_left_out_at"] == "ingest"
    assert d["detail"]["runtime_filter_note"].startswith("activity_enable_runtime_api: cuptiError")
    assert d["detail"]["runtime_calls_dropped_at_ingest"] == 6


def test_sync_record_joins_its_call_from_an_earlier_buffer(tmp_path, monkeypatch):
    fake = FakeCuptiNoFilter()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        t0 = time.monotonic_ns() + CUPTI_BASE_NS
        fake.completed([_api(cbid.cudaDeviceSynchronize_v3020, 5, t0, tid=77)])
        fake.completed([SimpleNamespace(kind=ActivityKind.SYNCHRONIZATION, type=3, correlation_id=1005,
                                        start=t0 + 510, end=t0 + 540),
                        SimpleNamespace(kind=ActivityKind.SYNCHRONIZATION, type=2, correlation_id=55555,
                                        start=t0 + 600, end=t0 + 700)])
        path = rec.snapshot("manual")
    inc = read_incident(path)
    api = inc.table("runtime_api").to_pandas()
    sync = api[api.name == "cuda_sync:3"]
    assert len(sync) == 1 and int(sync["thread_id"].iloc[0]) == 77 and bool(sync["is_sync"].iloc[0])
    assert inc.manifest["sources"]["cupti"]["detail"]["sync_records_without_api_call"] == 1


def test_mixed_buffer_optional_geometry_and_unknown_copy_kind(tmp_path, monkeypatch):
    fake = FakeCuptiNoFilter()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        t0 = time.monotonic_ns() + CUPTI_BASE_NS
        recs = [_kernel(0, t0), _kernel(1, t0, geometry=False),
                SimpleNamespace(kind=ActivityKind.MEMCPY, copy_kind=42, device_id=0, stream_id=7, bytes=8,
                                correlation_id=9, start=t0, end=t0 + 5),
                SimpleNamespace(kind=ActivityKind.MEMCPY, copy_kind=2, device_id=0, stream_id=7, bytes=8,
                                correlation_id=10, start=t0 + 6, end=t0 + 9),
                SimpleNamespace(kind=ActivityKind.MEMSET, device_id=0, stream_id=7, bytes=4, correlation_id=11,
                                start=t0 + 10, end=t0 + 12),
                SimpleNamespace(kind=999)]  # a kind nobody enabled: ignored
        fake.completed(recs)
        path = rec.snapshot("manual")
    inc = read_incident(path)
    k = inc.table("kernels").to_pandas().sort_values("correlation_id")
    assert k["grid_x"].tolist()[0] == 4 and k["grid_x"].isna().tolist() == [False, True]
    assert sorted(inc.table("memcpy").to_pandas()["kind"]) == ["DtoH", "memset", "unknown"]
    assert inc.manifest["sources"]["cupti"]["detail"]["records"] == 5


def test_large_buffer_keeps_buffer_order_and_every_field():
    src = CuptiSource(1 << 12, 1 << 12, 1 << 6)
    fake = FakeCuptiNoFilter()
    orig = cupti_mod.cupti
    cupti_mod.cupti = fake
    try:
        src.ingest(_launch_loop(10**12, 1000))
    finally:
        cupti_mod.cupti = orig
    k = src.kernels.copy().columns
    a = src.api.copy().columns
    assert np.array_equal(k["corr"], 1000 + 3 * np.arange(1000) + 1)
    assert np.array_equal(k["start"], 10**12 + (3 * np.arange(1000) + 1) * 100 + 60)
    assert [src.name_list[i] for i in k["name"][:4]] == ["k0", "k1", "k2", "k0"]
    assert np.array_equal(a["corr"], k["corr"]) and (a["tid"] == 4242).all() and (a["sync"] == 0).all()
    assert src.records == 2000 and src.runtime_calls_dropped == 2000


def test_overhead_benchmark_reports_what_cupti_kept(monkeypatch):
    from benchmarks.recorder_overhead import _cupti_report

    fake = FakeCuptiNoFilter()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    src = CuptiSource(1 << 8, 1 << 8, 1 << 4)
    src.ingest(_launch_loop(10**12, 5))
    rep = _cupti_report(src)
    assert rep["kernels_written"] == 5 and rep["runtime_api_written"] == 5
    assert rep["runtime_api_names"] == ["cudaLaunchKernel_v7000"]
    assert rep["runtime_calls_left_out_at"] == "ingest" and rep["runtime_calls_dropped_at_ingest"] == 10


def test_cupti_filter_that_silences_all_runtime_records_is_flagged(tmp_path, monkeypatch):
    fake = FakeCuptiFull()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        t0 = time.monotonic_ns() + CUPTI_BASE_NS
        fake.completed([_kernel(i, t0) for i in range(3)])  # kernels, and no runtime call at all
        path = rec.snapshot("manual")
    d = read_incident(path).manifest["sources"]["cupti"]["detail"]
    assert d["runtime_calls_left_out_at"] == "cupti"
    assert d["runtime_filter_note"].startswith("no runtime API record arrived while kernels did")
