"""CUPTI activity through NVIDIA's cupti-python: kernels, memcpy/memset, runtime API,
synchronization; plus the CUPTI -> host clock calibration.

CUPTI timestamps are on their own base (shared/notes/gpu.md: 94.66 s against
monotonic's 43.72 s), so every ring keeps raw CUPTI ns and the snapshot maps them with
`host = cupti + offset`, the offset interpolated between calibrations. A calibration
brackets `cupti.get_timestamp()` between two `time.monotonic_ns()` reads; the tightest
of a few brackets wins and its half-width is the uncertainty (a `clock_sync` row).

Records arrive in `buffer_completed` on CUPTI's thread, a buffer at a time; each buffer
becomes column arrays and one vectorized ring insert per table. `cupti` below is the
one binding object; tests substitute it to inject failures or synthetic records.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from ..clock import now_ns
from ...incident import source
from ..ring import Ring

try:  # the binding object; None when cupti-python is not installed
    from cupti import cupti  # type: ignore
except Exception:  # ImportError, or a CUDA library mismatch raised at import time
    cupti = None

BUFFER_BYTES = 4 << 20
CALIBRATION_READS = 7
MEMCPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
                8: "DtoD", 9: "HtoH", 10: "PtoP"}
# Runtime calls that block the calling host thread until the GPU reaches a point.
SYNC_CALLS = ("Synchronize", "cudaMemcpy_v", "cudaMemcpy2D_v", "cudaFree_v")


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class CuptiSource:
    KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "SYNCHRONIZATION")

    def __init__(self, kernel_cap: int, api_cap: int, memcpy_cap: int):
        self.kernels = Ring("kernels", {"name": "q", "device": "q", "stream": "q", "corr": "q", "start": "q", "end": "q",
                                        "gx": "q", "gy": "q", "gz": "q", "bx": "q", "by": "q", "bz": "q"}, kernel_cap)
        self.api = Ring("runtime_api", {"name": "q", "tid": "q", "corr": "q", "start": "q", "end": "q", "sync": "q"}, api_cap)
        self.memcpy = Ring("memcpy", {"kind": "q", "device": "q", "stream": "q", "bytes": "q", "corr": "q",
                                      "start": "q", "end": "q"}, memcpy_cap)
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.calibrations: list[tuple[int, int, int, int]] = []  # (host_ns, cupti_ns, offset, uncertainty)
        self.reason_absent: str | None = None
        self.errors: list[str] = []
        self.error_count = 0
        self.records = 0
        self.dropped_sync_without_api = 0
        self.enabled_kinds: list[str] = []
        self._api_tid: dict[int, int] = {}  # correlation id -> thread id, for sync records
        self._lock = threading.Lock()
        self.running = False

    @property
    def nbytes(self) -> int:
        return self.kernels.nbytes + self.api.nbytes + self.memcpy.nbytes

    def _error(self, msg: str) -> None:
        self.error_count += 1
        if len(self.errors) < 20:
            self.errors.append(msg)

    def _name(self, s: str) -> int:
        i = self.names.get(s)
        if i is None:
            if len(self.name_list) >= 1 << 20:
                s = "<names over budget>"
                i = self.names.get(s)
                if i is not None:
                    return i
            i = self.names[s] = len(self.name_list)
            self.name_list.append(s)
        return i

    # ---- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        cu = cupti
        if cu is None:
            self.reason_absent = "cupti-python absent (pip install cupti-python; needs a matching nvidia-cuda-cupti)"
            return
        try:
            cu.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
            for k in self.KINDS:
                kind = getattr(cu.ActivityKind, k, None)
                if kind is None:
                    continue
                cu.activity_enable(kind)
                self.enabled_kinds.append(k)
            self.calibrate()
            self.running = True
        except Exception as exc:  # cuptiError and friends: recorded, never raised into the host
            self.reason_absent = f"CUPTI error: {_err(exc)}"
            self._error(self.reason_absent)
            self._disable()

    def _disable(self) -> None:
        cu = cupti
        for k in self.enabled_kinds:
            try:
                cu.activity_disable(getattr(cu.ActivityKind, k))
            except Exception as exc:
                self._error(f"activity_disable {k}: {_err(exc)}")
        self.enabled_kinds = []

    def stop(self) -> None:
        if not self.running:
            return
        self.flush()
        self._disable()
        self.running = False

    def flush(self) -> None:
        """Force CUPTI to hand over every buffered record, then recalibrate."""
        if not self.running:
            return
        try:
            cupti.activity_flush_all(1)
        except Exception as exc:
            self._error(f"activity_flush_all: {_err(exc)}")
        self.calibrate()

    def calibrate(self) -> None:
        best = None
        try:
            for _ in range(CALIBRATION_READS):
                a = now_ns()
                c = int(cupti.get_timestamp())
                b = now_ns()
                if best is None or b - a < best[1] - best[0]:
                    best = (a, b, c)
        except Exception as exc:
            self._error(f"get_timestamp: {_err(exc)}")
            return
        a, b, c = best
        mid = (a + b) // 2
        with self._lock:
            if len(self.calibrations) < 4096:
                self.calibrations.append((mid, c, mid - c, (b - a + 1) // 2))

    # ---- CUPTI callbacks (CUPTI's thread) ------------------------------------------------
    def _buffer_requested(self):
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities) -> None:
        try:
            self.ingest(activities)
        except Exception as exc:  # an exception here would surface inside CUDA calls of the host
            self._error(f"buffer_completed: {_err(exc)}")

    def ingest(self, activities) -> None:
        cu = cupti
        AK = cu.ActivityKind
        k_kernel, k_memcpy, k_memset = int(AK.CONCURRENT_KERNEL), int(AK.MEMCPY), int(AK.MEMSET)
        k_runtime = int(AK.RUNTIME)
        k_sync = int(getattr(AK, "SYNCHRONIZATION", -1))
        kern, mem, api, syncs = [], [], [], []
        for a in activities:
            kind = int(a.kind)
            if kind == k_kernel:
                # Launch geometry is optional in the table: a record without it gets nulls (-1 here).
                kern.append((self._name(str(a.name)), a.device_id, a.stream_id, a.correlation_id, a.start, a.end,
                             *(getattr(a, f, -1) for f in _GEOMETRY)))
            elif kind == k_memcpy:
                mem.append((int(a.copy_kind), a.device_id, a.stream_id, a.bytes, a.correlation_id, a.start, a.end))
            elif kind == k_memset:
                mem.append((-1, a.device_id, a.stream_id, a.bytes, a.correlation_id, a.start, a.end))
            elif kind == k_runtime:
                name = _api_name(cu, a.cbid)
                sync = any(s in name for s in SYNC_CALLS)
                api.append((self._name(name), a.thread_id, a.correlation_id, a.start, a.end, int(sync)))
                if len(self._api_tid) > 1 << 16:
                    self._api_tid.clear()
                self._api_tid[int(a.correlation_id)] = int(a.thread_id)
            elif kind == k_sync:
                syncs.append(a)
        for a in syncs:
            tid = self._api_tid.get(int(a.correlation_id))
            if tid is None:
                self.dropped_sync_without_api += 1
                continue
            api.append((self._name(f"cuda_sync:{_sync_type(cu, a)}"), tid, a.correlation_id, a.start, a.end, 1))
        self.records += len(kern) + len(mem) + len(api)
        if kern:
            arr = np.array(kern, dtype=np.int64).T
            self.kernels.extend(**dict(zip(("name", "device", "stream", "corr", "start", "end",
                                             "gx", "gy", "gz", "bx", "by", "bz"), arr)))
        if mem:
            arr = np.array(mem, dtype=np.int64).T
            self.memcpy.extend(**dict(zip(("kind", "device", "stream", "bytes", "corr", "start", "end"), arr)))
        if api:
            arr = np.array(api, dtype=np.int64).T
            self.api.extend(**dict(zip(("name", "tid", "corr", "start", "end", "sync"), arr)))

    # ---- snapshot ------------------------------------------------------------------
    def to_host(self, cupti_ns: np.ndarray) -> np.ndarray:
        with self._lock:
            cal = list(self.calibrations)
        if not cal:
            raise ValueError("no clock calibration")
        c = np.array([x[1] for x in cal], dtype=np.float64)
        off = np.array([x[2] for x in cal], dtype=np.float64)
        return cupti_ns + np.rint(np.interp(cupti_ns.astype(np.float64), c, off)).astype(np.int64)

    def copies(self) -> dict:
        return {"kernels": self.kernels.copy(), "runtime_api": self.api.copy(), "memcpy": self.memcpy.copy()}

    def tables(self, copies: dict, since_ns: int, until_ns: int) -> dict[str, pa.Table]:
        out = {}
        names = np.array(self.name_list + ["<unknown>"], dtype=object)
        k = copies["kernels"].columns
        if len(k["seq"]) and self.calibrations:
            s, e = self.to_host(k["start"]), self.to_host(k["end"])
            m = (e >= since_ns) & (e <= until_ns)
            out["kernels"] = pa.table({
                "name": pa.array(names[k["name"][m]], pa.string()), "device": pa.array(k["device"][m], pa.int32()),
                "stream": pa.array(k["stream"][m], pa.int64()), "correlation_id": pa.array(k["corr"][m], pa.int64()),
                "start_ns": pa.array(s[m], pa.int64()), "end_ns": pa.array(e[m], pa.int64()),
                **{f"{g}_{d}": pa.array(k[f"{g[0]}{d}"][m], pa.int32(), mask=k[f"{g[0]}{d}"][m] < 0)
                   for g in ("grid", "block") for d in "xyz"},
            })
        a = copies["runtime_api"].columns
        if len(a["seq"]) and self.calibrations:
            s, e = self.to_host(a["start"]), self.to_host(a["end"])
            m = (e >= since_ns) & (e <= until_ns)
            out["runtime_api"] = pa.table({
                "name": pa.array(names[a["name"][m]], pa.string()), "thread_id": pa.array(a["tid"][m], pa.int64()),
                "correlation_id": pa.array(a["corr"][m], pa.int64()), "start_ns": pa.array(s[m], pa.int64()),
                "end_ns": pa.array(e[m], pa.int64()), "is_sync": pa.array(a["sync"][m].astype(bool), pa.bool_()),
            })
        c = copies["memcpy"].columns
        if len(c["seq"]) and self.calibrations:
            s, e = self.to_host(c["start"]), self.to_host(c["end"])
            m = (e >= since_ns) & (e <= until_ns)
            kinds = np.array([MEMCPY_KINDS.get(i, "unknown") for i in range(11)] + ["memset"], dtype=object)
            out["memcpy"] = pa.table({
                "kind": pa.array(kinds[c["kind"][m]], pa.string()), "device": pa.array(c["device"][m], pa.int32()),
                "stream": pa.array(c["stream"][m], pa.int64()), "bytes": pa.array(c["bytes"][m], pa.int64()),
                "correlation_id": pa.array(c["corr"][m], pa.int64()), "start_ns": pa.array(s[m], pa.int64()),
                "end_ns": pa.array(e[m], pa.int64()),
            })
        with self._lock:
            cal = list(self.calibrations)
        if cal:
            out["clock_sync"] = pa.table({
                "source": pa.array(["cupti"] * len(cal), pa.string()),
                "ts_host_ns": pa.array([x[0] for x in cal], pa.int64()),
                "offset_ns": pa.array([x[2] for x in cal], pa.int64()),
                "uncertainty_ns": pa.array([x[3] for x in cal], pa.int64()),
            })
        return out

    def manifest_entry(self, copies: dict) -> dict:
        detail = {"kinds": list(self.enabled_kinds), "records": self.records, "error_count": self.error_count,
                  "errors": list(self.errors), "calibrations": len(self.calibrations),
                  "sync_records_without_api_call": self.dropped_sync_without_api,
                  **{f"{n}_written": c.written for n, c in copies.items()},
                  **{f"{n}_overwritten": c.overwritten for n, c in copies.items()}}
        if self.calibrations:
            detail["clock_uncertainty_ns_max"] = max(x[3] for x in self.calibrations)
        if self.reason_absent:
            return source("not_observed", self.reason_absent, **detail)
        if not self.calibrations:
            return source("not_observed", f"CUPTI error: no clock calibration ({self.errors[0] if self.errors else 'unknown'})", **detail)
        return source("observed", None, **detail)


_GEOMETRY = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
_API_NAMES: dict[int, str] = {}


def _api_name(cu, cbid: int) -> str:
    name = _API_NAMES.get(cbid)
    if name is None:
        name = f"cbid:{cbid}"
        enum = getattr(cu, "runtime_api_trace_cbid", None) or getattr(cu, "Runtime_api_trace_cbid", None)
        if enum is not None:
            try:
                name = enum(cbid).name
            except (ValueError, TypeError):
                pass
        _API_NAMES[cbid] = name
    return name


def _sync_type(cu, a) -> str:
    t = getattr(a, "type", None)
    enum = getattr(cu, "ActivitySynchronizationType", None)
    if enum is not None and t is not None:
        try:
            return enum(t).name
        except (ValueError, TypeError):
            pass
    return str(t)
