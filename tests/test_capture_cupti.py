"""CUPTI source on CPU: absent binding -> not_observed; a binding that fails -> recorded
error; synthetic activity records through the real callback path -> tables on the host
timeline with a clock_sync row. The binding object is the only thing substituted."""

from __future__ import annotations

import time
from types import SimpleNamespace

from workflow_lib.capture.sources import cupti as cupti_mod
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder

from benchmarks.fake_cupti import CUPTI_BASE_NS, ActivityKind, FakeCupti, cuptiError, runtime_api_trace_cbid  # noqa: F401


def _records(t0_cupti: int):
    k = lambda i: SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL, name=f"gemm_{i % 2}", device_id=0, stream_id=7,
                                  correlation_id=100 + i, start=t0_cupti + i * 1000, end=t0_cupti + i * 1000 + 500,
                                  grid_x=128, grid_y=1, grid_z=1, block_x=256, block_y=1, block_z=1)
    api = lambda i: SimpleNamespace(kind=ActivityKind.RUNTIME, cbid=211, thread_id=4242, correlation_id=100 + i,
                                    start=t0_cupti + i * 1000 - 300, end=t0_cupti + i * 1000 - 100)
    sync_api = SimpleNamespace(kind=ActivityKind.RUNTIME, cbid=165, thread_id=4242, correlation_id=999,
                               start=t0_cupti + 5000, end=t0_cupti + 9000)
    sync = SimpleNamespace(kind=ActivityKind.SYNCHRONIZATION, type=3, correlation_id=999, start=t0_cupti + 5100, end=t0_cupti + 8900)
    cp = SimpleNamespace(kind=ActivityKind.MEMCPY, copy_kind=1, device_id=0, stream_id=7, bytes=4096, correlation_id=50,
                         start=t0_cupti + 10, end=t0_cupti + 400)
    ms = SimpleNamespace(kind=ActivityKind.MEMSET, device_id=0, stream_id=7, bytes=64, correlation_id=51,
                         start=t0_cupti + 450, end=t0_cupti + 460)
    return [k(i) for i in range(4)] + [api(i) for i in range(4)] + [sync_api, sync, cp, ms]


def test_absent_binding_is_not_observed(tmp_path, monkeypatch):
    monkeypatch.setattr(cupti_mod, "cupti", None)
    rec = recorder(tmp_path, sources=("host", "cupti"))
    with rec:
        path = rec.snapshot("manual")
    entry = read_incident(path).manifest["sources"]["cupti"]
    assert entry["status"] == "not_observed" and entry["reason"].startswith("cupti-python absent")


def test_cupti_error_never_raises_and_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(cupti_mod, "cupti", FakeCupti(fail={"activity_enable"}))
    rec = recorder(tmp_path, sources=("host", "cupti"))
    with rec:
        with rec.span("work"):
            pass
        path = rec.snapshot("manual")
    inc = read_incident(path)
    entry = inc.manifest["sources"]["cupti"]
    assert entry["status"] == "not_observed"
    assert entry["reason"] == "CUPTI error: cuptiError: activity_enable: CUPTI_ERROR_NOT_INITIALIZED"
    assert inc.table("spans").num_rows == 1


def test_callback_records_become_tables_on_host_timeline(tmp_path, monkeypatch):
    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        host_t0 = time.monotonic_ns()
        fake.completed(_records(host_t0 + CUPTI_BASE_NS))
        path = rec.snapshot("manual")
    inc = read_incident(path)
    assert inc.observed("cupti")
    k = inc.table("kernels").to_pandas()
    assert len(k) == 4 and set(k["name"]) == {"gemm_0", "gemm_1"}
    # Mapped back onto monotonic within the calibration uncertainty (plus scheduling slop).
    assert abs(int(k["start_ns"].iloc[0]) - host_t0) < 2_000_000
    assert (k["grid_x"] == 128).all() and (k["block_x"] == 256).all()
    api = inc.table("runtime_api").to_pandas()
    assert set(api["name"]) == {"cudaLaunchKernel_v7000", "cudaDeviceSynchronize_v3020", "cuda_sync:3"}
    assert set(api.loc[api.is_sync, "name"]) == {"cudaDeviceSynchronize_v3020", "cuda_sync:3"}
    assert (api["thread_id"] == 4242).all()
    mc = inc.table("memcpy").to_pandas()
    assert sorted(mc["kind"]) == ["HtoD", "memset"]
    # Records without memory kinds or flags (older bindings): null, never a guessed kind.
    assert mc["src_kind"].isna().all() and mc["dst_kind"].isna().all() and mc["is_async"].isna().all()
    cs = inc.table("clock_sync").to_pandas()
    assert len(cs) >= 2 and (cs["source"] == "cupti").all()
    assert (abs(cs["offset_ns"] + CUPTI_BASE_NS) < 1_000_000).all()
    assert (cs["uncertainty_ns"] >= 0).all()


def test_memcpy_memory_kinds_and_async_flag(tmp_path, monkeypatch):
    """CUPTI's memcpy record names the memory on each side and whether the copy was async:
    a pageable HtoD issued async, a pinned DtoH issued sync, an async memset of device memory."""
    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        t0 = time.monotonic_ns() + CUPTI_BASE_NS
        cp = lambda kind, src, dst, flags, corr: SimpleNamespace(
            kind=ActivityKind.MEMCPY, copy_kind=kind, device_id=0, stream_id=7, bytes=1 << 20, correlation_id=corr,
            start=t0 + corr, end=t0 + corr + 100, src_kind=src, dst_kind=dst, flags=flags)
        ms = SimpleNamespace(kind=ActivityKind.MEMSET, device_id=0, stream_id=7, bytes=64, correlation_id=9,
                             start=t0 + 900, end=t0 + 910, memory_kind=3, flags=1)
        fake.completed([cp(1, 1, 3, 1, 1), cp(2, 3, 2, 0, 2), ms])
        path = rec.snapshot("manual")
    mc = read_incident(path).table("memcpy").sort_by("correlation_id").to_pylist()
    got = [(r["kind"], r["src_kind"], r["dst_kind"], r["is_async"]) for r in mc]
    assert got == [("HtoD", "pageable", "device", True), ("DtoH", "device", "pinned", False), ("memset", None, "device", True)]


def test_buffer_callback_bug_is_contained(tmp_path, monkeypatch):
    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = recorder(tmp_path, sources=("cupti",))
    with rec:
        fake.completed([SimpleNamespace(kind=ActivityKind.CONCURRENT_KERNEL)])  # record missing every field
        path = rec.snapshot("manual")
    entry = read_incident(path).manifest["sources"]["cupti"]
    assert any("buffer_completed: AttributeError" in e for e in entry["detail"]["errors"])
