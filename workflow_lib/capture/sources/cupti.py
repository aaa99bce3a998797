"""CUPTI activity through NVIDIA's cupti-python: kernels, memcpy/memset, runtime API,
synchronization; plus the CUPTI -> host clock calibration.

CUPTI timestamps are on their own base (shared/notes/gpu.md: 94.66 s against
monotonic's 43.72 s), so every ring keeps raw CUPTI ns and the snapshot maps them with
`host = cupti + offset`, the offset interpolated between calibrations. A calibration
brackets `cupti.get_timestamp()` between two `time.monotonic_ns()` reads; the tightest
of a few brackets wins and its half-width is the uncertainty (a `clock_sync` row).

Records arrive in `buffer_completed` on CUPTI's thread, a buffer at a time, holding the
GIL: each buffer becomes column arrays (C-level field reads, no bytecode per record) and
one vectorized ring insert per table. Query-only runtime calls (DROPPED_RUNTIME_CALLS) are
left out: CUPTI is asked not to record them where the binding allows, else ingest drops
them. `cupti` below is the one binding object; tests substitute it to inject failures or
synthetic records. With `parser="raw"` (the default) CUPTI hands the buffers' bytes to
cupti_raw.py instead and cupti_parse.py reads them into the same rings, with no Python
object per record; `ingest` below is the path for cupti-python's record objects.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
from operator import attrgetter, itemgetter

import numpy as np
import pyarrow as pa

from ...core import arrow
from ..clock import now_ns
from ...core.incident import source
from ..ring import Ring
from . import cupti_raw
# One definition of CUPTI's codes, shared with the raw parser. The async flag is bit 0 of
# `flags` (CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC, and _MEMSET_ASYNC).
from .cupti_parse import MEMCPY_FLAG_ASYNC, MEMCPY_KINDS, MEMORY_KINDS, _lookup_into, _sync_type

try:  # the binding object; None when cupti-python is not installed
    from cupti import cupti  # type: ignore
except Exception:  # ImportError, or a CUDA library mismatch raised at import time
    cupti = None

BUFFER_BYTES = 4 << 20
CALIBRATION_READS = 7
# Runtime calls that block the calling host thread until the GPU reaches a point: one
# definition for every stage (workflow_lib/core/vocabulary.py; cudaFree yes, cudaMalloc no).
from ...core.vocabulary import is_sync_call
# Runtime calls left out of runtime_api: queries that return at once, neither enqueue GPU
# work nor wait for it. PyTorch issues some per kernel launch (cudaGetLastError after each
# launch, cudaGetDevice in device guards), doubling the records of a launch-bound loop.
# What the diagnosis reads from runtime_api, and why these are not in it:
#   launch_bound: launch calls (LAUNCH_RE: *LaunchKernel*, *GraphLaunch*, Memcpy/MemsetAsync)
#     joined to kernels by correlation id, their durations and thread - kept;
#   sync_stall and the host_sync_api_ns measure: calls with is_sync (vocabulary) and
#     SYNCHRONIZATION records - kept;
#   host_submission: "was the host in a sync" (is_sync rows - kept) and the submitting thread
#     (the thread of the last call before a gap: launches are kept, so it is the thread that
#     launched last rather than one that last queried a device attribute);
#   the host_api_ns measure (time inside any runtime call) loses these queries' time,
#     each well under a microsecond.
# Every other call (event/stream queries and waits, allocations, copies, graph calls, ...)
# is kept. The count left out is reported as `runtime_calls_dropped`.
DROPPED_RUNTIME_CALLS = frozenset({
    "cudaGetDevice", "cudaGetDeviceCount", "cudaGetLastError", "cudaPeekAtLastError", "cudaStreamIsCapturing",
    "cudaGetDeviceProperties", "cudaDeviceGetAttribute", "cudaPointerGetAttributes", "cudaFuncGetAttributes",
    "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaGetErrorString", "cudaGetErrorName",
    "cudaStreamGetCaptureInfo", "cudaThreadExchangeStreamCaptureMode",
})
_VERSION_SUFFIX = re.compile(r"(_v\d+)+$")
RECENT_CALLS = 1 << 16  # runtime (corr, tid) pairs kept for sync records of later buffers


DETACH_ENV = "STALLCASE_CUPTI_DETACH"


def _torch_profiler_on() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch._C._autograd._profiler_enabled())
    except Exception:  # an older or newer torch without it: assume none
        return False


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# Named sets of activity kinds (FlightRecorder(cupti_kinds=...)): "kernel" is the cheapest
# useful set (what a kernel-timeline finding reads; no runtime API, copies or syncs).
KIND_SETS = {
    "kernel": ("CONCURRENT_KERNEL",),
    "default": ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "SYNCHRONIZATION"),
}


def cupti_kinds_of(value) -> tuple[str, ...] | None:
    """A kinds option (a KIND_SETS name, a comma list, or a tuple of kind names) as a tuple;
    None for the default set."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if value in KIND_SETS:
            return KIND_SETS[value]
        value = [v.strip() for v in value.split(",") if v.strip()]
    return tuple(value)


PARSERS = ("raw", "binding")
MAX_WINDOWS = 1024  # armed windows remembered (a bounded list, like every other record)


class CuptiSource:
    """CUPTI activity, always on (`armed=True` at start) or armed for windows (`arm`/`disarm`).

    Triggered use is the recorder's second tier: the always-on layer (spans, steps, NVML,
    sched) runs all the time, and CUPTI kernel activity is enabled only for the steps after
    a latency trigger fires (shared/notes/gpu.md and docs/benchmarks.md: always-on CUPTI
    cost +16% to +40% on host-bound loops). `windows` are the host-clock intervals during
    which activity was enabled: outside them kernels were not observed, which is what the
    diagnosis must say for those steps (`covered_steps` below).
    """

    KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "SYNCHRONIZATION")

    def __init__(self, kernel_cap: int, api_cap: int, memcpy_cap: int, kinds: tuple[str, ...] | None = None,
                 buffer_bytes: int = 0, flush_period_ms: int = 0, parser: str = "raw"):
        self.kernels = Ring("kernels", {"name": "q", "device": "q", "stream": "q", "corr": "q", "start": "q", "end": "q",
                                        "gx": "q", "gy": "q", "gz": "q", "bx": "q", "by": "q", "bz": "q"}, kernel_cap)
        self.api = Ring("runtime_api", {"name": "q", "tid": "q", "corr": "q", "start": "q", "end": "q", "sync": "q"}, api_cap)
        self.thread_ids = "not set"
        self.memcpy = Ring("memcpy", {"kind": "q", "device": "q", "stream": "q", "bytes": "q", "corr": "q",
                                      "start": "q", "end": "q", "src": "q", "dst": "q", "flags": "q"}, memcpy_cap)
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.calibrations: list[tuple[int, int, int, int]] = []  # (host_ns, cupti_ns, offset, uncertainty)
        self.reason_absent: str | None = None
        self.errors: list[str] = []
        self.error_count = 0
        self.records = 0
        self.dropped_sync_without_api = 0
        self.enabled_kinds: list[str] = []
        self.filter_runtime = True  # leave DROPPED_RUNTIME_CALLS out (see there)
        self.runtime_calls_dropped = 0
        self.runtime_filter_at = "ingest"  # or "cupti" when CUPTI itself stops recording them
        self.runtime_filter_note: str | None = None
        self._cbids: dict[int, tuple[int, int, bool]] = {}
        self._dropped_cbids: list[int] | None = None  # DROPPED_RUNTIME_CALLS' cbids (_filter_runtime_at_source)
        self._recent_corr = np.zeros(RECENT_CALLS, np.int64)
        self._recent_tid = np.zeros(RECENT_CALLS, np.int64)
        self._recent_n = 0
        self._lock = threading.Lock()
        self.running = False
        self.kinds = tuple(kinds) if kinds else self.KINDS
        unknown = [k for k in self.kinds if k not in self.KINDS]
        if unknown:
            raise ValueError(f"CuptiSource: unknown activity kind(s) {unknown}; known: {self.KINDS}, "
                             f"or a set name: {sorted(KIND_SETS)}")
        self.buffer_bytes = int(buffer_bytes) or BUFFER_BYTES
        self.flush_period_ms = int(flush_period_ms)
        self.mode = "always"
        self.armed = False
        self.windows: list[list[int | None]] = []  # [start_ns, end_ns or None while armed], host clock
        self.windows_dropped = 0
        self._registered = False
        # Triggered tier: CUPTI is detached (cuptiFinalize) between windows. Attached and idle,
        # with no activity kind enabled, it still cost the unchanged H200 transformer loop
        # +25% to +41% steady step time against the bare program (benchmarks/overhead_zero_change.py,
        # 2-3 pairs per arm; detached: +7%, docs/benchmarks.md round 5), a cost the in-process
        # on/paused design cannot see (CUPTI stays attached in both of its windows).
        # STALLCASE_CUPTI_DETACH=off keeps it attached (the cost, measured beside).
        self.detach_idle = (os.environ.get(DETACH_ENV, "on").strip().lower() not in ("off", "0", "false", "no"))
        self.detaches = 0
        # "raw": buffers read from their bytes (cupti_raw, cupti_parse), no object per record;
        # "binding": cupti-python's record objects (ingest below). Raw falls back to binding
        # where the binding's libcupti cannot be reached through ctypes; `parser_used` says.
        if parser not in PARSERS:
            raise ValueError(f"CuptiSource(parser={parser!r}): known {PARSERS}")
        self.parser, self.parser_used, self.parser_note, self.raw = parser, None, None, None

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
    def start(self, armed: bool = True) -> None:
        """Always-on (`armed`): register with CUPTI and enable activity now. Triggered: only
        check that the binding is there; CUPTI is first touched (callbacks registered, clock
        calibrated) at the first `arm()`, so the always-on layer has no CUPTI in the process
        at all until a trigger fires."""
        cu = cupti
        self.mode = "always" if armed else "triggered"
        if cu is None:
            self.reason_absent = "cupti-python absent (pip install cupti-python; needs a matching nvidia-cuda-cupti)"
            return
        self.running = True
        if armed and not self._register(cu):
            return
        if armed:
            try:
                self._enable(cu)
            except Exception as exc:  # cuptiError and friends: recorded, never raised into the host
                self._fail(exc)

    def _register(self, cu) -> bool:
        if self._registered:
            return True
        try:
            self._system_thread_ids(cu)
            if not self._register_raw(cu):
                cu.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
                self.parser_used = "binding"
            if self.flush_period_ms:
                try:  # a periodic flush is a policy, not a need: without it buffers flush when full
                    cu.activity_flush_period(self.flush_period_ms)
                except Exception as exc:
                    self._error(f"activity_flush_period: {_err(exc)}")
                    self.flush_period_ms = -1
            self.calibrate()
            self._registered = True
            return True
        except Exception as exc:
            self._fail(exc)
            return False

    def _register_raw(self, cu) -> bool:
        if self.parser != "raw":
            return False
        lib = cupti_raw.library_of(cu)
        if lib is None:
            self.parser_note = "raw buffers: the binding's libcupti is not reachable through ctypes; binding used"
            return False
        try:
            raw = cupti_raw.RawBuffers(self, lib, self.buffer_bytes, cupti)
            raw.register()
        except Exception as exc:
            self.parser_note = f"raw buffers: {_err(exc)}; binding used"
            return False
        self.raw, self.parser_used = raw, "raw"
        return True

    def _fail(self, exc: BaseException) -> None:
        self.reason_absent = f"CUPTI error: {_err(exc)}"
        self._error(self.reason_absent)
        self._disable()
        self.running = False

    def _enable(self, cu) -> None:
        for k in self.kinds:
            kind = getattr(cu.ActivityKind, k, None)
            if kind is None:
                continue
            cu.activity_enable(kind)
            self.enabled_kinds.append(k)
            if k == "RUNTIME":
                self._filter_runtime_at_source(cu)
        self.armed = True
        self._open_window()

    def _open_window(self) -> None:
        if len(self.windows) >= MAX_WINDOWS:
            self.windows.pop(0)
            self.windows_dropped += 1
        self.windows.append([now_ns(), None])

    def _close_window(self) -> None:
        if self.windows and self.windows[-1][1] is None:
            self.windows[-1][1] = now_ns()

    def arm(self) -> bool:
        """Enable activity now (triggered tier); False when CUPTI is not running or already armed."""
        if not self.running or self.armed:
            return False
        if not self._register(cupti):
            return False
        try:
            self._enable(cupti)
            self.calibrate()
            return True
        except Exception as exc:
            self._error(f"arm: {_err(exc)}")
            self._disable()
            return False

    def prepare(self) -> None:
        """Triggered tier with windows due: register and enable-disable activity once now, so
        CUPTI's one-time set-up is paid at start-up, not in the step the first window arms
        (H200, unchanged programs: that step took 64-124 ms against a 1.3-14 ms median and
        set off the latency trigger). Leaves no window: nothing was recorded."""
        if not self.running or self.armed or not self._register(cupti):
            return
        n = len(self.windows)
        try:
            self._enable(cupti)
        except Exception as exc:
            self._error(f"prepare: {_err(exc)}")
        self._disable()
        del self.windows[n:]
        self.flush()
        self.release()

    def release(self) -> None:
        """Triggered tier, between windows: flushed already, detach CUPTI from the process
        (cuptiFinalize); the next arm() registers again. Never while armed."""
        if self.mode != "triggered" or not self.detach_idle or self.armed or not self._registered:
            return
        fin = getattr(cupti, "finalize", None)
        if fin is None or _torch_profiler_on():
            return  # the program's own torch.profiler (Kineto) shares CUPTI: never pulled from under it
        try:
            fin()
        except Exception as exc:
            self._error(f"finalize: {_err(exc)}")
            self.detach_idle = False  # stays attached: the windows still work
            return
        self._registered = False
        self.detaches += 1

    def disarm(self) -> None:
        """Disable activity now; records already made arrive at the next flush (the snapshot's)."""
        if self.armed:
            self._disable()

    def _system_thread_ids(self, cu) -> None:
        """Ask CUPTI for Linux tids (gettid) instead of 32-bit-truncated pthread ids.

        Spans, steps and scheduler samples name threads by tid; with SYSTEM ids every
        thread matches, including C++ threads such as PyTorch's autograd device threads,
        which no Python-side mapping can reach. If the call is unavailable, the recorder
        maps the Python threads it can at snapshot time, and the detail says which applies.
        """
        try:
            cu.set_thread_id_type(int(cu.ActivityThreadIdType.SYSTEM))
            self.thread_ids = "system (Linux tid)"
        except Exception as exc:  # older cupti-python without the call: keep pthread ids
            self.thread_ids = f"pthread ids (set_thread_id_type failed: {_err(exc)})"

    def _filter_runtime_at_source(self, cu) -> None:
        """Ask CUPTI not to record DROPPED_RUNTIME_CALLS at all (cuptiActivityEnableRuntimeApi,
        per cbid): no record is built, buffered or handed to Python for them. Where the
        binding or CUPTI cannot, ingest leaves them out instead (same tables, more work)."""
        fn = getattr(cu, "activity_enable_runtime_api", None)
        enum = getattr(cu, "runtime_api_trace_cbid", None) or getattr(cu, "Runtime_api_trace_cbid", None)
        if not self.filter_runtime or fn is None or enum is None:
            return
        try:
            # The cbids are looked up once (the enum has hundreds of members): each arming of a
            # window (gpu_arming.py) sets the per-cbid state again, on the training thread.
            if self._dropped_cbids is None:
                self._dropped_cbids = [int(m) for m in enum if _base_api_name(m.name) in DROPPED_RUNTIME_CALLS]
            for cbid in self._dropped_cbids:
                fn(cbid, 0)
            self.runtime_filter_at = "cupti"
        except Exception as exc:  # older CUPTI: not supported; ingest filters
            self.runtime_filter_note = f"activity_enable_runtime_api: {_err(exc)}"

    def _disable(self) -> None:
        cu = cupti
        for k in self.enabled_kinds:
            try:
                cu.activity_disable(getattr(cu.ActivityKind, k))
            except Exception as exc:
                self._error(f"activity_disable {k}: {_err(exc)}")
        self.enabled_kinds = []
        if self.armed:
            self.armed = False
            self._close_window()

    def stop(self) -> None:
        if not self.running:
            return
        self.flush()
        self._disable()
        self.running = False

    def flush(self) -> None:
        """Force CUPTI to hand over every buffered record, then recalibrate."""
        if not self.running or not self._registered:
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
        return self.buffer_bytes, 0

    def _buffer_completed(self, activities) -> None:
        try:
            self.ingest(activities)
        except Exception as exc:  # an exception here would surface inside CUDA calls of the host
            self._error(f"buffer_completed: {_err(exc)}")

    def ingest(self, activities) -> None:
        """One buffer of records -> one vectorized ring insert per table.

        No Python bytecode runs per record: records are grouped by kind with NumPy, picked
        out with `operator.itemgetter` and read with `operator.attrgetter` (C loops over the
        binding's objects); names become ids per distinct name, runtime calls are named and
        classified per distinct cbid. This runs on CUPTI's thread holding the GIL, so every
        microsecond here is taken from the workload's launching thread.
        """
        cu = cupti
        acts = activities if isinstance(activities, (list, tuple)) else list(activities)
        n = len(acts)
        if n == 0:
            return
        AK = cu.ActivityKind
        k_kernel, k_memcpy, k_memset = int(AK.CONCURRENT_KERNEL), int(AK.MEMCPY), int(AK.MEMSET)
        k_runtime = int(AK.RUNTIME)
        k_sync = int(getattr(AK, "SYNCHRONIZATION", -1))
        kinds = np.fromiter(map(_KIND, acts), np.int64, n)
        by_kind = {int(k): _pick(acts, kinds, k) for k in np.unique(kinds)}
        api = None
        if k_runtime in by_kind:
            api = self._runtime_rows(cu, by_kind[k_runtime])
        if k_sync not in by_kind and api is not None and api[0].size:
            self._remember(api[2], api[1])
        if k_sync in by_kind:
            sync_rows = self._sync_rows(cu, by_kind[k_sync], api)
            api = sync_rows if api is None else (sync_rows if api[0].size == 0 else
                                                  tuple(np.concatenate(p) for p in zip(api, sync_rows)))
        mem = [self._memcpy_rows(by_kind[k], memset=(k == k_memset)) for k in (k_memcpy, k_memset) if k in by_kind]
        added = 0
        if k_kernel in by_kind:
            cols = self._kernel_cols(by_kind[k_kernel])
            self.kernels.extend(**cols)
            added += len(cols["corr"])
        if mem:
            arr = np.concatenate(mem) if len(mem) > 1 else mem[0]
            self.memcpy.extend(**dict(zip(_MEMCPY_COLUMNS, arr.T)))
            added += len(arr)
        if api is not None and api[0].size:
            self.api.extend(**dict(zip(("name", "tid", "corr", "start", "end", "sync"), api)))
            added += int(api[0].size)
        self.records += added

    def _name_ids(self, names) -> np.ndarray:
        """Ids of names, one dict lookup per record in C; new names added once each."""
        ids = np.fromiter(map(self.names.get, names, itertools.repeat(-1)), np.int64, len(names))
        if (ids < 0).any():
            for s in sorted(set(names).difference(self.names)):  # distinct new names, set ops in C
                self._name(s)
            ids = np.fromiter(map(self.names.get, names, itertools.repeat(-1)), np.int64, len(names))
            # A name refused by the name budget maps to the overflow entry.
            ids[ids < 0] = self.names.get("<names over budget>", len(self.name_list))
        return ids

    def _kernel_cols(self, recs) -> dict:
        base = _rows(_KERNEL_FIELDS, recs, 5)
        try:
            geo = _rows(_GEOMETRY_FIELDS, recs, 6)
        except AttributeError:
            # Launch geometry is optional in the table: a record without it gets nulls (-1 here).
            geo = np.array([[getattr(a, f, -1) for f in _GEOMETRY] for a in recs], dtype=np.int64).reshape(-1, 6)
        names = list(map(str, map(_NAME, recs)))
        cols = {"name": self._name_ids(names)}
        cols.update(zip(("device", "stream", "corr", "start", "end"), base.T))
        cols.update(zip(("gx", "gy", "gz", "bx", "by", "bz"), geo.T))
        return cols

    def _memcpy_rows(self, recs, memset: bool) -> np.ndarray:
        """Rows of _MEMCPY_COLUMNS; memory kinds and flags are -1 where a record lacks them."""
        if memset:
            rows = _rows(_MEMSET_FIELDS, recs, 6)
            extra = _optional_rows(_MEMSET_EXTRA, recs)
            return np.column_stack([np.full(len(rows), -1, np.int64), rows, np.full(len(rows), -1, np.int64), extra])
        rows = _rows(_MEMCPY_FIELDS, recs, 7)
        # Copy kinds this table does not name are "unknown", never another kind's label.
        rows[:, 0] = np.where((rows[:, 0] >= 0) & (rows[:, 0] < len(MEMCPY_KINDS)), rows[:, 0], 0)
        return np.column_stack([rows, _optional_rows(_MEMCPY_EXTRA, recs)])

    def _runtime_rows(self, cu, recs) -> tuple[np.ndarray, ...]:
        """(name id, tid, corr, start, end, sync) of the runtime calls the diagnosis reads;
        calls in DROPPED_RUNTIME_CALLS are counted and left out (see that constant)."""
        rows = _rows(_API_FIELDS, recs, 5)
        cbid = rows[:, 0]
        uniq, inv = np.unique(cbid, return_inverse=True)
        info = [self._cbid_info(cu, int(c)) for c in uniq.tolist()]  # per distinct cbid
        keep_u = np.array([not drop for _, _, drop in info], bool)
        keep = keep_u[inv]
        if not keep.all():
            self.runtime_calls_dropped += int((~keep).sum())
        name_u = np.array([i for i, _, _ in info], np.int64)
        sync_u = np.array([s for _, s, _ in info], np.int64)
        r = rows[keep]
        return (name_u[inv][keep], r[:, 1], r[:, 2], r[:, 3], r[:, 4], sync_u[inv][keep])

    def _cbid_info(self, cu, cbid: int) -> tuple[int, int, bool]:
        """(name id, is_sync, dropped) of a runtime cbid; cached per cbid."""
        got = self._cbids.get(cbid)
        if got is None:
            name = _api_name(cu, cbid)
            got = self._cbids[cbid] = (self._name(name), int(is_sync_call(name)),
                                       self.filter_runtime and _base_api_name(name) in DROPPED_RUNTIME_CALLS)
        return got

    def _sync_rows(self, cu, recs, api) -> tuple[np.ndarray, ...]:
        """Synchronization records as runtime rows on the thread of the call that waited.

        The thread comes from the runtime record with the same correlation id: looked up in
        this buffer's calls first, then in the recent calls kept from earlier buffers."""
        rows = _rows(_SYNC_FIELDS, recs, 3)
        corr = rows[:, 0]
        tid = np.full(len(corr), -1, np.int64)
        if api is not None and api[0].size:
            _lookup_into(tid, corr, api[2], api[1])
        miss = tid < 0
        if miss.any() and self._recent_n:
            m = min(self._recent_n, len(self._recent_corr))
            _lookup_into(tid, corr, self._recent_corr[:m], self._recent_tid[:m])
        if api is not None and api[0].size:
            self._remember(api[2], api[1])
        ok = tid >= 0
        self.dropped_sync_without_api += int((~ok).sum())
        # Few records (one per synchronizing call); one without a type field is named "None".
        types = np.array([-1 if t is None else int(t) for t in map(_sync_type_of, recs)], np.int64)
        tu, tinv = np.unique(types, return_inverse=True)
        names = np.array([self._name(f"cuda_sync:{_sync_type(cu, None if t < 0 else t)}") for t in tu.tolist()],
                         np.int64)[tinv]
        r = rows[ok]
        return (names[ok], tid[ok], r[:, 0], r[:, 1], r[:, 2], np.ones(int(ok.sum()), np.int64))

    def _remember(self, corr: np.ndarray, tid: np.ndarray) -> None:
        """Keep the newest runtime (corr, tid) pairs for sync records of later buffers."""
        cap = len(self._recent_corr)
        corr, tid = corr[-cap:], tid[-cap:]
        pos = (self._recent_n + np.arange(len(corr))) % cap
        self._recent_corr[pos] = corr
        self._recent_tid[pos] = tid
        self._recent_n += len(corr)

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
        names = self.name_list + ["<unknown>"]
        k = copies["kernels"].columns
        if len(k["seq"]) and self.calibrations:
            s, e = self.to_host(k["start"]), self.to_host(k["end"])
            m = (e >= since_ns) & (e <= until_ns)
            out["kernels"] = arrow.table({
                "name": arrow.strings_at(names, k["name"][m]), "device": arrow.numbers(k["device"][m], pa.int32()),
                "stream": arrow.numbers(k["stream"][m]), "correlation_id": arrow.numbers(k["corr"][m]),
                "start_ns": arrow.numbers(s[m]), "end_ns": arrow.numbers(e[m]),
                **{f"{g}_{d}": arrow.numbers(k[f"{g[0]}{d}"][m], pa.int32(), mask=k[f"{g[0]}{d}"][m] < 0)
                   for g in ("grid", "block") for d in "xyz"},
            })
        a = copies["runtime_api"].columns
        if len(a["seq"]) and self.calibrations:
            s, e = self.to_host(a["start"]), self.to_host(a["end"])
            m = (e >= since_ns) & (e <= until_ns)
            out["runtime_api"] = arrow.table({
                "name": arrow.strings_at(names, a["name"][m]), "thread_id": arrow.numbers(a["tid"][m]),
                "correlation_id": arrow.numbers(a["corr"][m]), "start_ns": arrow.numbers(s[m]),
                "end_ns": arrow.numbers(e[m]), "is_sync": arrow.bools(a["sync"][m].astype(bool)),
            })
        c = copies["memcpy"].columns
        if len(c["seq"]) and self.calibrations:
            s, e = self.to_host(c["start"]), self.to_host(c["end"])
            m = (e >= since_ns) & (e <= until_ns)
            kinds = [MEMCPY_KINDS.get(i, "unknown") for i in range(11)] + ["memset"]
            out["memcpy"] = arrow.table({
                "kind": arrow.strings_at(kinds, c["kind"][m]), "device": arrow.numbers(c["device"][m], pa.int32()),
                "stream": arrow.numbers(c["stream"][m]), "bytes": arrow.numbers(c["bytes"][m]),
                "correlation_id": arrow.numbers(c["corr"][m]), "start_ns": arrow.numbers(s[m]),
                "end_ns": arrow.numbers(e[m]),
                "src_kind": _memory_words(c["src"][m]), "dst_kind": _memory_words(c["dst"][m]),
                "is_async": pa.array([None if f < 0 else bool(f & MEMCPY_FLAG_ASYNC) for f in c["flags"][m].tolist()], pa.bool_()),
            })
        with self._lock:
            cal = list(self.calibrations)
        if cal:
            out["clock_sync"] = arrow.table({
                "source": arrow.strings(["cupti"] * len(cal)),
                "ts_host_ns": arrow.numbers([x[0] for x in cal]),
                "offset_ns": arrow.numbers([x[2] for x in cal]),
                "uncertainty_ns": arrow.numbers([x[3] for x in cal]),
            })
        return out

    def window_list(self, since_ns: int, until_ns: int) -> list[list[int]]:
        """Armed intervals clipped to [since, until]; an open one ends at `until`."""
        out = []
        for s, e in list(self.windows):
            e = until_ns if e is None else e
            s, e = max(s, since_ns), min(e, until_ns)
            if e > s:
                out.append([int(s), int(e)])
        return out

    def manifest_entry(self, copies: dict, since_ns: int | None = None, until_ns: int | None = None) -> dict:
        since_ns = 0 if since_ns is None else since_ns
        until_ns = now_ns() if until_ns is None else until_ns
        detail = {"kinds": list(self.kinds), "enabled_now": list(self.enabled_kinds), "mode": self.mode,
                  "windows": self.window_list(since_ns, until_ns), "windows_dropped": self.windows_dropped,
                  "windows_rule": ("host-clock intervals during which CUPTI activity was enabled; kernels outside "
                                   "them were not observed (workflow_lib.capture.sources.cupti.covered_steps)"),
                  "parser": self.parser_used, "parser_requested": self.parser,
                  **({"parser_note": self.parser_note} if self.parser_note else {}),
                  **({"raw_buffers": self.raw.buffers, "raw_buffers_unread": self.raw.unread,
                      "raw_size_notes": list(self.raw.size_notes), "raw_buffers_zeroed_by_us": self.raw.zeroed}
                     if self.raw else {}),
                  "buffer_bytes": self.buffer_bytes, "flush_period_ms": self.flush_period_ms, "detached_between_windows": self.detaches, "records": self.records, "error_count": self.error_count,
                  "errors": list(self.errors), "calibrations": len(self.calibrations),
                  "sync_records_without_api_call": self.dropped_sync_without_api,
                  "thread_id_type": self.thread_ids,
                  "runtime_calls_left_out": sorted(DROPPED_RUNTIME_CALLS) if self.filter_runtime else [],
                  "runtime_calls_left_out_at": self.runtime_filter_at if self.filter_runtime else None,
                  "runtime_calls_dropped_at_ingest": self.runtime_calls_dropped,
                  **({"runtime_filter_note": self.runtime_filter_note} if self.runtime_filter_note else {}),
                  **{f"{n}_written": c.written for n, c in copies.items()},
                  **{f"{n}_overwritten": c.overwritten for n, c in copies.items()}}
        if (self.runtime_filter_at == "cupti" and "RUNTIME" in self.enabled_kinds and self.kernels.written
                and not self.api.written):
            # Kernels without a single runtime call: the per-cbid filter may have switched
            # off all runtime records on this CUPTI; say so where the reader looks.
            detail["runtime_filter_note"] = ("no runtime API record arrived while kernels did: check that "
                                             "activity_enable_runtime_api(cbid, 0) leaves other calls recorded")
        if self.calibrations:
            detail["clock_uncertainty_ns_max"] = max(x[3] for x in self.calibrations)
        if self.reason_absent:
            return source("not_observed", self.reason_absent, **detail)
        if self.mode == "triggered" and not self._registered and not self.detaches:
            return source("not_observed", "triggered GPU activity: no window was armed yet (the latency trigger "
                          "did not fire), so kernels were not observed", **detail)
        if not self.calibrations:
            return source("not_observed", f"CUPTI error: no clock calibration ({self.errors[0] if self.errors else 'unknown'})", **detail)
        return source("observed", None, **detail)


_GEOMETRY = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
# C-level field readers: one call per record reads every field the ring keeps.
_KIND = attrgetter("kind")
_NAME = attrgetter("name")
_KERNEL_FIELDS = attrgetter("device_id", "stream_id", "correlation_id", "start", "end")
_GEOMETRY_FIELDS = attrgetter(*_GEOMETRY)
_MEMCPY_FIELDS = attrgetter("copy_kind", "device_id", "stream_id", "bytes", "correlation_id", "start", "end")
_MEMSET_FIELDS = attrgetter("device_id", "stream_id", "bytes", "correlation_id", "start", "end")
_MEMCPY_EXTRA = ("src_kind", "dst_kind", "flags")
_MEMSET_EXTRA = ("memory_kind", "flags")
_MEMCPY_COLUMNS = ("kind", "device", "stream", "bytes", "corr", "start", "end", "src", "dst", "flags")


def _optional_rows(names: tuple[str, ...], recs) -> np.ndarray:
    """(len(recs), len(names)) int64 of fields a record may lack (older bindings): -1 there."""
    try:
        return _rows(attrgetter(*names), recs, len(names))
    except AttributeError:
        return np.array([[int(getattr(a, f, -1)) for f in names] for a in recs], np.int64).reshape(-1, len(names))


def _memory_words(codes: np.ndarray) -> pa.Array:
    return pa.array([MEMORY_KINDS.get(int(k)) for k in codes.tolist()], pa.string())
_API_FIELDS = attrgetter("cbid", "thread_id", "correlation_id", "start", "end")
_SYNC_FIELDS = attrgetter("correlation_id", "start", "end")


def _sync_type_of(a):
    return getattr(a, "type", None)


_API_NAMES: dict[int, str] = {}


def _rows(getter, recs, width: int) -> np.ndarray:
    """(len(recs), width) int64 of the getter's fields: one flat C-level pass, no tuple list
    (np.array over a list of tuples costs ~2x more per record)."""
    flat = np.fromiter(itertools.chain.from_iterable(map(getter, recs)), np.int64, len(recs) * width)
    return flat.reshape(-1, width)


def _pick(acts, kinds: np.ndarray, kind: int):
    """The records of one kind, in buffer order, gathered in C."""
    idx = np.flatnonzero(kinds == kind)
    if idx.size == len(acts):
        return acts
    if idx.size == 1:
        return [acts[int(idx[0])]]
    return itemgetter(*idx.tolist())(acts)


def _base_api_name(name: str) -> str:
    """cudaGetDeviceProperties_v2_v12000 -> cudaGetDeviceProperties."""
    return _VERSION_SUFFIX.sub("", name)


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




# ---- for readers of an incident (the diagnosis) -------------------------------------------
def activity_windows(manifest: dict) -> list[tuple[int, int]] | None:
    """Host-clock intervals of an incident during which CUPTI activity was recorded.

    None: CUPTI was not observed at all (every step's kernels are "not observed").
    A manifest from before windows were recorded, with CUPTI observed, was always on: its
    whole window counts as covered.
    """
    src = (manifest.get("sources") or {}).get("cupti") or {}
    if src.get("status") != "observed":
        return None
    detail = src.get("detail") or {}
    wins = detail.get("windows")
    if wins is None:
        w = manifest.get("window") or {}
        if "start_ns" in w and "end_ns" in w:
            return [(int(w["start_ns"]), int(w["end_ns"]))]
        return None
    return [(int(a), int(b)) for a, b in wins]


def covered_steps(manifest: dict, start_ns, end_ns) -> np.ndarray:
    """Per step (arrays of host start/end ns): True where the whole step lies inside one
    window of recorded GPU activity, so its kernels were observed; False means "kernels not
    observed" for that step (CUPTI off, or armed only for other steps)."""
    start = np.asarray(start_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    out = np.zeros(start.shape, dtype=bool)
    wins = activity_windows(manifest)
    if not wins:
        return out
    for a, b in wins:
        out |= (start >= a) & (end <= b)
    return out
