"""A stand-in for NVIDIA's CUPTI binding (cupti-python): the activity kinds, runtime-call ids and
the callback registration the recorder's CUPTI source calls, so its buffer path runs on a CPU.

Shared by the CUPTI benchmarks (cupti_parse_cost.py, cupti_ingest_cost.py) and the CUPTI tests
(tests/test_capture_cupti*.py): a benchmark must not import a test module, so the fake lives
here, beside the scripts that time the real parse code with it.
"""

from __future__ import annotations

import enum
import time

CUPTI_BASE_NS = 50 * 10**9  # the fake CUPTI clock runs 50 s ahead of monotonic


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    SYNCHRONIZATION = 38


class runtime_api_trace_cbid(enum.IntEnum):
    cudaLaunchKernel_v7000 = 211
    cudaDeviceSynchronize_v3020 = 165


class cbid(enum.IntEnum):
    """Runtime-call ids including the query-only calls the source leaves out."""

    cudaGetDevice_v3020 = 17
    cudaGetLastError_v3020 = 10
    cudaGetDeviceProperties_v2_v12000 = 440
    cudaEventQuery_v3020 = 141
    cudaLaunchKernel_v7000 = 211
    cudaDeviceSynchronize_v3020 = 165
    cudaStreamSynchronize_v3020 = 131


class cuptiError(Exception):
    pass


class FakeCupti:
    ActivityKind = ActivityKind
    runtime_api_trace_cbid = runtime_api_trace_cbid

    def __init__(self, fail=()):
        self.fail, self.enabled, self.completed = set(fail), [], None

    def _check(self, name):
        if name in self.fail:
            raise cuptiError(f"{name}: CUPTI_ERROR_NOT_INITIALIZED")

    def activity_register_callbacks(self, requested, completed):
        self._check("activity_register_callbacks")
        assert requested()[0] > 0
        self.completed = completed

    def activity_enable(self, kind):
        self._check("activity_enable")
        self.enabled.append(kind)

    def activity_disable(self, kind):
        self.enabled.remove(kind)

    def activity_flush_all(self, flag):
        self._check("activity_flush_all")

    def get_timestamp(self):
        self._check("get_timestamp")
        return time.monotonic_ns() + CUPTI_BASE_NS


class FakeCuptiNoFilter(FakeCupti):
    """A binding without activity_enable_runtime_api: query calls are left out at ingest."""

    runtime_api_trace_cbid = cbid
