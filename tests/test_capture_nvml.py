"""NVML source: not_observed with a reason when NVML is absent; samples through the binding
when it answers; errors never reach the host application.

The binding object (`workflow_lib.capture.sources.nvml.pynvml`) is the edge we cannot reach
on a GPU-less machine; tests substitute it, nothing else.
"""

from __future__ import annotations

import time
from types import SimpleNamespace


from workflow_lib.capture.sources import nvml as nvml_mod
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder


class NVMLError(Exception):
    pass


class FakeNVML:
    """Answers like one H200 at idle; `fail` names functions that raise NVMLError."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU, NVML_GPU_UTILIZATION_SAMPLES = 1, 2, 0, 1

    def __init__(self, devices=1, fail=()):
        self.devices, self.fail, self.calls = devices, set(fail), 0

    def _f(self, name, value):
        self.calls += 1
        if name in self.fail:
            raise NVMLError(f"{name}: Unknown Error")
        return value

    def nvmlInit(self):
        return self._f("nvmlInit", None)

    def nvmlShutdown(self):
        return self._f("nvmlShutdown", None)

    def nvmlDeviceGetCount(self):
        return self._f("nvmlDeviceGetCount", self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self._f("nvmlDeviceGetHandleByIndex", i)

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self._f("nvmlDeviceGetClockInfo", 1980 if kind == 1 else 2619)

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return self._f("nvmlDeviceGetMaxClockInfo", 1980)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._f("nvmlDeviceGetPowerUsage", 120_000)

    def nvmlDeviceGetTemperature(self, h, kind):
        return self._f("nvmlDeviceGetTemperature", 35)

    def nvmlDeviceGetMemoryInfo(self, h):
        return self._f("nvmlDeviceGetMemoryInfo", SimpleNamespace(used=1 << 30))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._f("nvmlDeviceGetCurrentClocksEventReasons", 0x1)

    def nvmlDeviceGetViolationStatus(self, h, policy):
        return self._f("nvmlDeviceGetViolationStatus", SimpleNamespace(referenceTime=0, violationTime=1000 * policy))

    def nvmlDeviceGetUtilizationRates(self, h):
        return self._f("nvmlDeviceGetUtilizationRates", SimpleNamespace(gpu=97, memory=40))

    def nvmlDeviceGetSamples(self, h, kind, since_us):
        now_us = time.time_ns() // 1000
        samples = [SimpleNamespace(timeStamp=now_us - 400_000 + 200_000 * i, sampleValue=SimpleNamespace(uiVal=90 + i)) for i in range(2)]
        return self._f("nvmlDeviceGetSamples", (1, [s for s in samples if s.timeStamp > since_us]))


def test_no_nvml_library_is_not_observed_with_reason(tmp_path):
    # This machine has pynvml but no driver: nvmlInit fails for real.
    rec = recorder(tmp_path, sources=("host", "nvml"))
    with rec:
        path = rec.snapshot("manual")
    inc = read_incident(path)
    entry = inc.manifest["sources"]["nvml"]
    if nvml_mod.pynvml is None:
        assert entry["reason"].startswith("NVML absent")
    assert entry["status"] == "not_observed" and entry["reason"]
    assert "nvml" not in inc.tables or inc.table("nvml").num_rows == 0


def test_zero_devices_is_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(nvml_mod, "pynvml", FakeNVML(devices=0))
    rec = recorder(tmp_path, sources=("nvml",))
    with rec:
        path = rec.snapshot("manual")
    entry = read_incident(path).manifest["sources"]["nvml"]
    assert entry == {**entry, "status": "not_observed", "reason": "no GPU: NVML reports 0 devices"}


def test_fake_gpu_polled_and_driver_samples_mapped_to_host_clock(tmp_path, monkeypatch):
    monkeypatch.setattr(nvml_mod, "pynvml", FakeNVML(devices=2))
    rec = recorder(tmp_path, sources=("nvml",))
    with rec:
        time.sleep(0.3)
        path = rec.snapshot("manual")
    inc = read_incident(path)
    assert inc.observed("nvml")
    df = inc.table("nvml").to_pandas()
    assert set(df["device"]) == {0, 1}
    poll = df[df.source == "poll"]
    assert set(poll["metric"]) == set(nvml_mod.METRICS)
    assert poll.loc[poll.metric == "clock_event_reasons", "value"].iloc[0] == 1.0
    drv = df[df.source == "driver_samples"]
    assert len(drv) == 4  # two samples per device, drained once
    # Driver samples were 400 and 200 ms before "now" in Unix time: on the host timeline
    # they must sit just before the poll rows.
    gap_ms = (poll["ts_ns"].min() - drv["ts_ns"].min()) / 1e6
    assert 300 < gap_ms < 600


def test_nvml_init_error_never_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(nvml_mod, "pynvml", FakeNVML(fail={"nvmlInit"}))
    rec = recorder(tmp_path, sources=("host", "nvml"))
    with rec:
        with rec.span("ok"):
            pass
        path = rec.snapshot("manual")
    entry = read_incident(path).manifest["sources"]["nvml"]
    assert entry["status"] == "not_observed"
    assert "nvmlInit: Unknown Error" in entry["reason"]


def test_nvml_errors_mid_run_are_recorded_and_sampler_stops(tmp_path, monkeypatch):
    everything = {n for n in dir(FakeNVML) if n.startswith("nvmlDeviceGet") and n not in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex")}
    fake = FakeNVML(fail=everything)
    monkeypatch.setattr(nvml_mod, "pynvml", fake)
    monkeypatch.setattr(nvml_mod.NvmlSampler, "__init__", _fast_init(nvml_mod.NvmlSampler.__init__))
    rec = recorder(tmp_path, sources=("host", "nvml"))
    with rec:
        time.sleep(0.4)
        path = rec.snapshot("manual")
    entry = read_incident(path).manifest["sources"]["nvml"]
    assert entry["status"] == "not_observed" and entry["reason"].startswith("NVML error:")
    assert entry["detail"]["stopped_on_errors"] is True
    assert entry["detail"]["error_count"] >= nvml_mod.MAX_CONSECUTIVE_ERRORS


def _fast_init(orig):
    def init(self, capacity, unix_minus_host_ns, **kw):
        orig(self, capacity, unix_minus_host_ns, poll_s=0.01, drain_s=0.01)
    return init


def test_sampler_bug_is_contained(tmp_path, monkeypatch):
    fake = FakeNVML()
    fake.nvmlDeviceGetSamples = lambda *a: (_ for _ in ()).throw(ZeroDivisionError("bug"))
    monkeypatch.setattr(nvml_mod, "pynvml", fake)
    rec = recorder(tmp_path, sources=("nvml",))
    with rec:
        time.sleep(0.2)
        path = rec.snapshot("manual")
    entry = read_incident(path).manifest["sources"]["nvml"]
    assert entry["status"] == "observed"
    assert any("ZeroDivisionError" in e for e in entry["detail"]["errors"])
