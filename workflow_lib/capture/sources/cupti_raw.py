"""CUPTI activity buffers taken raw: the buffer callbacks registered with libcupti through ctypes.

cupti-python's `activity_register_callbacks` turns every record into a Python object before
our callback runs. Registering our own C-callable callbacks with the same libcupti (the copy
cupti-python loaded: see library_of; enabling kinds, flushing and timestamps still go
through the binding) hands us the buffer's address and valid size instead; the
records are read by cupti_parse with NumPy and no object is built per record.

Buffers are preallocated NumPy arrays from a small pool (8-byte aligned as CUPTI requires),
handed to CUPTI in `requested` and returned to the pool in `completed`; a buffer CUPTI asks
for beyond the pool is allocated and kept (never freed while CUPTI may hold it). A buffer
that does not match the known layouts is counted (`raw_buffers_unread`) and its error
recorded: the parser never guesses.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import cupti_parse

_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                              ctypes.POINTER(ctypes.c_size_t))
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
POOL_BUFFERS = 8
ZEROED_OUT_ACTIVITY_BUFFER = 5  # CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER (cupti_activity.h)


def library_of(cu) -> ctypes.CDLL | None:
    """The libcupti the binding module `cu` uses; None for anything but the real binding, or
    when that library cannot be told apart from another copy.

    cupti-python loads libcupti through cuda-pathfinder, whose `load_nvidia_dynamic_lib` is
    cached per process: asking it again names the very file the binding loaded (torch may have
    mapped its own, older copy as well). Without pathfinder, the one libcupti mapped into the
    process is used, and two copies are refused: registering with the wrong one loses every record."""
    if getattr(cu, "__name__", "") != "cupti.cupti":
        return None
    try:
        cu.get_timestamp()  # makes sure the binding has loaded its library
    except Exception:
        return None
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib  # type: ignore

        return ctypes.CDLL(load_nvidia_dynamic_lib("cupti").abs_path)
    except Exception:
        pass
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({parts[5].strip() for parts in (ln.split(None, 5) for ln in f)
                            if len(parts) == 6 and "libcupti.so" in parts[5]})
        return ctypes.CDLL(paths[0]) if len(paths) == 1 else None
    except Exception:
        return None


class RawBuffers:
    """Owns the ctypes callbacks (kept alive here) and the buffer pool of one CuptiSource."""

    def __init__(self, source, lib: ctypes.CDLL, buffer_bytes: int, cu):
        # cu: the cupti-python binding the source uses (its enums name the record kinds); passed
        # in, since cupti_parse may not import cupti.py (cupti.py imports this module).
        self.source, self.lib, self.buffer_bytes, self.cu = source, lib, int(buffer_bytes), cu
        self.names = cupti_parse.NameCache()
        self._free = [self._new() for _ in range(POOL_BUFFERS)]
        self._out: dict[int, np.ndarray] = {}  # address -> buffer CUPTI holds now
        self._lock = threading.Lock()
        self.buffers = 0
        self.unread = 0
        self.zeroed = False
        # Record sizes as libcupti's own iterator shows them, learned from the first buffer
        # (cupti_parse.sizes_for): a CUPTI newer than the known layouts is walked correctly.
        self.sizes: dict[int, int] | None = None
        self.size_notes: list[str] = []
        self._next = getattr(lib, "cuptiActivityGetNextRecord", None)
        if self._next is not None:
            self._next.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
            self._next.restype = ctypes.c_int
        self._req = _REQUESTED(self._requested)
        self._cmp = _COMPLETED(self._completed)

    def _new(self) -> np.ndarray:
        return np.zeros(self.buffer_bytes // 8, np.uint64).view(np.uint8)  # 8-byte aligned

    def register(self) -> None:
        rc = self.lib.cuptiActivityRegisterCallbacks(self._req, self._cmp)
        if rc != 0:
            raise RuntimeError(f"cuptiActivityRegisterCallbacks returned {rc}")
        # Without this attribute CUPTI zeroes each buffer it is handed on the thread that asked
        # for it, which can be the launching thread; our buffers come zeroed (each is cleared
        # on CUPTI's thread after it is read). Where the attribute is refused, CUPTI zeroes.
        one, size = ctypes.c_uint8(1), ctypes.c_size_t(1)
        setter = getattr(self.lib, "cuptiActivitySetAttribute", None)
        self.zeroed = bool(setter is not None and
                           setter(ZEROED_OUT_ACTIVITY_BUFFER, ctypes.byref(size), ctypes.byref(one)) == 0)

    def _learn_sizes(self, addr: int, valid: int) -> None:
        if self._next is None:
            self.sizes = dict(cupti_parse.SIZES)
            self.size_notes = ["cuptiActivityGetNextRecord absent: known sizes used"]
            return
        seen = cupti_parse.sizes_from_iterator(self._next, addr, valid)
        self.sizes, self.size_notes = cupti_parse.sizes_for(seen)
        for note in self.size_notes:
            self.source._error(f"raw buffers: {note}")

    def _requested(self, buf_pp, size_p, max_records_p) -> None:
        with self._lock:
            buf = self._free.pop() if self._free else self._new()
            addr = buf.ctypes.data
            self._out[addr] = buf
        buf_pp[0] = addr
        size_p[0] = buf.nbytes
        max_records_p[0] = 0

    def _completed(self, ctx, stream_id, addr, size, valid) -> None:
        with self._lock:
            buf = self._out.pop(addr, None)
        if buf is None:
            self.source._error(f"raw buffer_completed: unknown buffer at {addr:#x}")
            return
        try:
            if valid:
                self.buffers += 1
                if self.sizes is None:
                    self._learn_sizes(addr, int(valid))
                cupti_parse.ingest(self.source, buf, int(valid), self.names, self.cu, sizes=self.sizes)
        except cupti_parse.LayoutError as exc:
            self.unread += 1
            self.source._error(f"raw buffer not read (layout): {exc}")
        except Exception as exc:  # never into CUDA calls of the host
            self.unread += 1
            self.source._error(f"raw buffer_completed: {type(exc).__name__}: {exc}")
        finally:
            if self.zeroed:
                buf[:valid] = 0  # CUPTI was told it gets zeroed buffers (see register)
            with self._lock:
                if len(self._free) < POOL_BUFFERS:
                    self._free.append(buf)
