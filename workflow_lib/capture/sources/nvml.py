"""NVML: a slow poll of clocks, power, temperature, memory and clock-event reasons per GPU,
plus the driver's own buffered utilization samples (`nvmlDeviceGetSamples`), drained rarely.

A Python thread waking 100 times a second costs ~1.5% on a launch-bound loop (see
shared/notes/gpu.md), so the poll is slow (1 s by default) and utilization comes from
the driver buffer instead. Driver sample timestamps are Unix microseconds; they are
mapped onto the host timeline with the recorder's `unix_minus_host_ns`.

`pynvml` below is the one binding object; tests substitute it to inject failures.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from ...core import arrow
from ..clock import now_ns
from ...core.incident import source
from ..ring import Ring

try:  # the binding object; None when nvidia-ml-py is not installed
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pynvml  # type: ignore
except ImportError:  # pragma: no cover - depends on the host
    pynvml = None

METRICS = ("gpu_util_pct", "mem_util_pct", "sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz",
           "power_mw", "temp_c", "mem_used_bytes", "clock_event_reasons",
           "violation_power_ns", "violation_thermal_ns", "violation_board_limit_ns", "violation_reliability_ns")
# nvmlDeviceGetViolationStatus policies (nvml.h nvmlPerfPolicyType_t): cumulative ns the GPU
# spent held below its clocks for each reason since the driver loaded. A delta between two
# polls says exactly how long it was throttled in between, however short the steps are: a
# zero delta rules throttling out for every step inside, whatever the poll period.
VIOLATIONS = (("violation_power_ns", 0), ("violation_thermal_ns", 1), ("violation_board_limit_ns", 3),
              ("violation_reliability_ns", 5))
_M = {m: i for i, m in enumerate(METRICS)}
SOURCES = ("poll", "driver_samples")
# Consecutive failed polls after which the sampler stops (and says so) instead of spinning on errors.
MAX_CONSECUTIVE_ERRORS = 5


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class NvmlSampler:
    def __init__(self, capacity: int, unix_minus_host_ns: int, poll_s: float = 1.0, drain_s: float = 5.0,
                 max_poll_s: float = 8.0):
        self.ring = Ring("nvml", {"device": "q", "ts_ns": "q", "metric": "q", "value": "d", "source": "q"}, capacity)
        self.unix_minus_host_ns = unix_minus_host_ns
        self.poll_s, self.base_poll_s, self.max_poll_s, self.drain_s = poll_s, poll_s, max_poll_s, drain_s
        self.handles: list = []
        self.reason_absent: str | None = None
        self.errors: list[str] = []
        self.error_count = 0
        self.polls = 0
        self.backoffs = 0
        self.stopped_on_errors = False
        self._last_sample_us: dict[int, int] = {}
        self._no_violations: set[int] = set()
        self._max_sm: dict[int, int] = {}  # device -> its maximum SM clock (asked once)
        self._stop = threading.Event()
        self.paused = False  # set by FlightRecorder.pause(): skip samples, keep the thread
        self._thread: threading.Thread | None = None
        self._inited = False
        self.native_id: int | None = None

    @property
    def nbytes(self) -> int:
        return self.ring.nbytes

    def _error(self, msg: str) -> None:
        self.error_count += 1
        if len(self.errors) < 20:
            self.errors.append(msg)

    def start(self) -> None:
        nv = pynvml
        if nv is None:
            self.reason_absent = "NVML absent: nvidia-ml-py (pynvml) is not installed"
            return
        try:
            nv.nvmlInit()
            self._inited = True
            count = nv.nvmlDeviceGetCount()
            self.handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:  # NVMLError and ctypes failures alike: the host app must not see them
            self.reason_absent = f"NVML absent: {_err(exc)}"
            self._error(self.reason_absent)
            return
        if not self.handles:
            self.reason_absent = "no GPU: NVML reports 0 devices"
            return
        self._thread = threading.Thread(target=self._run, name="stallcase-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._inited:
            try:
                pynvml.nvmlShutdown()
            except Exception as exc:
                self._error(f"nvmlShutdown: {_err(exc)}")
            self._inited = False

    def back_off(self) -> bool:
        if self.poll_s >= self.max_poll_s:
            return False
        self.poll_s = min(self.poll_s * 2, self.max_poll_s)
        self.backoffs += 1
        return True

    def poll_once(self) -> bool:
        """One poll of every device; True if at least one value was read."""
        nv = pynvml
        ok = False
        for dev, h in enumerate(self.handles):
            ts = now_ns()
            queries = (
                ("sm_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                ("mem_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                ("max_sm_clock_mhz", lambda: self._max_sm_clock(dev, h)),
                ("power_mw", lambda: nv.nvmlDeviceGetPowerUsage(h)),
                ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                ("mem_used_bytes", lambda: nv.nvmlDeviceGetMemoryInfo(h).used),
                ("clock_event_reasons", lambda: _reasons(nv, h)),
            ) + tuple((m, (lambda p=p: nv.nvmlDeviceGetViolationStatus(h, p).violationTime)) for m, p in VIOLATIONS
                      if dev not in self._no_violations)
            for metric, q in queries:
                try:
                    v = float(q())
                except Exception as exc:
                    if metric.startswith("violation_"):
                        self._no_violations.add(dev)  # not supported on this GPU/driver: asked once
                    self._error(f"device {dev} {metric}: {_err(exc)}")
                    continue
                self.ring.append(dev, ts, _M[metric], v, 0)
                ok = True
            try:
                u = nv.nvmlDeviceGetUtilizationRates(h)
                self.ring.append(dev, ts, _M["gpu_util_pct"], float(u.gpu), 0)
                self.ring.append(dev, ts, _M["mem_util_pct"], float(u.memory), 0)
                ok = True
            except Exception as exc:
                self._error(f"device {dev} utilization: {_err(exc)}")
        self.polls += 1
        return ok

    def _max_sm_clock(self, dev: int, h) -> int:
        """The device's maximum SM clock, asked once: a constant of the board, and on the H200
        the second slowest query of a poll (py-spy, 2026-12-04: ~1.5 ms of the driver's time a
        poll, beside the step's own CUDA calls)."""
        v = self._max_sm.get(dev)
        if v is None:
            v = self._max_sm[dev] = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
        return v

    def drain_once(self) -> int:
        """Copy the driver's buffered utilization samples newer than the last drained one."""
        nv = pynvml
        n = 0
        for dev, h in enumerate(self.handles):
            try:
                vtype, samples = nv.nvmlDeviceGetSamples(h, nv.NVML_GPU_UTILIZATION_SAMPLES, self._last_sample_us.get(dev, 0))
            except Exception as exc:
                self._error(f"device {dev} nvmlDeviceGetSamples: {_err(exc)}")
                continue
            if not samples:
                continue
            ts_us = np.array([s.timeStamp for s in samples], dtype=np.int64)
            vals = np.array([_sample_value(vtype, s.sampleValue) for s in samples], dtype=np.float64)
            self._last_sample_us[dev] = int(ts_us.max())
            k = len(ts_us)
            for t, v in zip(ts_us * 1000 - self.unix_minus_host_ns, vals):
                self.ring.append(dev, int(t), _M["gpu_util_pct"], float(v), 1)
            n += k
        return n

    def _run(self) -> None:
        self.native_id = threading.get_native_id()
        next_drain = 0.0
        consecutive = 0
        while not self._stop.is_set():
            if self.paused:  # the recorder is paused: the thread stays, the sample is skipped
                self._stop.wait(self.poll_s)
                continue
            try:
                consecutive = 0 if self.poll_once() else consecutive + 1
                t = now_ns() / 1e9
                if t >= next_drain:
                    self.drain_once()
                    next_drain = t + self.drain_s
            except Exception as exc:  # a bug here must not reach the host application
                self._error(f"nvml sampler: {_err(exc)}")
                consecutive += 1
            if consecutive >= MAX_CONSECUTIVE_ERRORS:
                self.stopped_on_errors = True
                return
            self._stop.wait(self.poll_s)

    def table(self, copy, since_ns: int, until_ns: int) -> pa.Table:
        c = copy.columns
        keep = (c["ts_ns"] >= since_ns) & (c["ts_ns"] <= until_ns)
        return arrow.table({
            "device": arrow.numbers(c["device"][keep], pa.int32()),
            "ts_ns": arrow.numbers(c["ts_ns"][keep]),
            "metric": arrow.strings_at(list(METRICS), c["metric"][keep]),
            "value": arrow.numbers(c["value"][keep], pa.float64()),
            "source": arrow.strings_at(list(SOURCES), c["source"][keep]),
        })

    def manifest_entry(self, copy) -> dict:
        detail = {"devices": len(self.handles), "poll_s": self.poll_s, "drain_s": self.drain_s, "polls": self.polls,
                  "rows_written": copy.written, "rows_overwritten": copy.overwritten, "backoffs": self.backoffs,
                  "error_count": self.error_count, "errors": list(self.errors),
                  "stopped_on_errors": self.stopped_on_errors,
                  "driver_sample_clock": "unix microseconds mapped with unix_minus_host_ns"}
        if self.reason_absent:
            return source("not_observed", self.reason_absent, **detail)
        if copy.written == 0:
            why = f"NVML error: {self.errors[0]}" if self.errors else "no sample taken yet (recorder stopped before the first poll)"
            return source("not_observed", why, **detail)
        return source("observed", None, **detail)


def _reasons(nv, h) -> int:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return fn(h)


def _sample_value(vtype: int, v) -> float:
    # NVML_VALUE_TYPE_*: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
    field = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(vtype, "uiVal")
    return float(getattr(v, field))
