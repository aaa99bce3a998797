"""CUPTI activity buffers parsed from their raw bytes: NumPy over the buffer, no object per record.

cupti-python hands `buffer_completed` a list with one Python object per record, built while
holding the GIL on CUPTI's thread; on a launch-bound loop that is most of always-on CUPTI's
cost (issue 28: 0.72 of torch.profiler's overhead). Here a buffer is read as bytes: the
records are walked in runs of one kind (CUPTI writes long runs: kernel-only buffers are one
run), each run's positions are probed with NumPy (a run of n records of size s ends at the
first position whose kind differs, so the walk is exact and costs Python work per run, not
per record), and every field is gathered for all records of a kind at once. Kernel names
are `const char *` shared by every record of the same kernel (CUPTI's documented contract),
so each distinct pointer is read once and cached.

Layouts are those of CUPTI 13 (CUDA 13.0's cupti_activity.h; cupti-python 13.4.0 with
nvidia-cuda-cupti 13.5 on the H200): CUpti_ActivityKernel10 (216 bytes), CUpti_ActivityMemcpy6
(96), CUpti_ActivityMemset4 (88), CUpti_ActivityAPI (40), CUpti_ActivitySynchronization2
(56); the ctypes structures below mirror them (offsets checked against the header by
tests/test_capture_cupti_parse.py where the header and a compiler exist). A buffer that does
not walk exactly to its valid size, or holds a kind not listed, raises `LayoutError`: the
caller counts it and never guesses. `parse_python` is the per-record pure-Python walk with
`struct`, the fallback and the reference the vectorized path is tested against.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

# CUPTI's CUpti_ActivityMemcpyKind, by value (both parsers name copies with it; defined once in
# core/vocabulary.py, which the nsys import reads too).
from ...core.vocabulary import CUPTI_MEMCPY_KINDS as MEMCPY_KINDS


def _lookup_into(out: np.ndarray, keys: np.ndarray, table_keys: np.ndarray, table_vals: np.ndarray) -> None:
    """out[i] = table_vals[j] where table_keys[j] == keys[i], for entries of out still < 0."""
    if table_keys.size == 0:
        return
    order = np.argsort(table_keys, kind="stable")
    sk = table_keys[order]
    pos = np.minimum(np.searchsorted(sk, keys), sk.size - 1)
    hit = (sk[pos] == keys) & (out < 0)
    out[hit] = table_vals[order][pos[hit]]


def _sync_type(cu, t) -> str:
    enum = getattr(cu, "ActivitySynchronizationType", None)
    if enum is not None and t is not None:
        try:
            return enum(t).name
        except (ValueError, TypeError):
            pass
    return str(t)


# CUpti_ActivityKind values (cupti_activity.h).
KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME, KIND_CONCURRENT_KERNEL, KIND_SYNCHRONIZATION = 1, 2, 5, 10, 38
KIND_KERNEL = 3  # the serialized-kernel record has the same layout as CONCURRENT_KERNEL
MEMCPY_FLAG_ASYNC = 1  # CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC
# CUpti_ActivityMemoryKind -> the memcpy table's words (static device/managed memory is still
# device/managed memory); 0 (unknown) and kinds not listed are null in the table.
MEMORY_KINDS = {1: "pageable", 2: "pinned", 3: "device", 4: "array", 5: "managed", 6: "device", 7: "managed"}


class ActivityKernel10(ctypes.Structure):
    """CUpti_ActivityKernel10: the fields the recorder reads, the rest as padding of the same size."""

    _fields_ = [("kind", ctypes.c_uint32), ("_cache_shared_regs", ctypes.c_uint8 * 4), ("_pgc", ctypes.c_uint32 * 2),
                ("start", ctypes.c_uint64), ("end", ctypes.c_uint64), ("completed", ctypes.c_uint64),
                ("deviceId", ctypes.c_uint32), ("contextId", ctypes.c_uint32), ("streamId", ctypes.c_uint32),
                ("gridX", ctypes.c_int32), ("gridY", ctypes.c_int32), ("gridZ", ctypes.c_int32),
                ("blockX", ctypes.c_int32), ("blockY", ctypes.c_int32), ("blockZ", ctypes.c_int32),
                ("staticSharedMemory", ctypes.c_int32), ("dynamicSharedMemory", ctypes.c_int32),
                ("localMemoryPerThread", ctypes.c_uint32), ("localMemoryTotal", ctypes.c_uint32),
                ("correlationId", ctypes.c_uint32), ("gridId", ctypes.c_int64), ("name", ctypes.c_void_p),
                ("reserved0", ctypes.c_void_p), ("queued", ctypes.c_uint64), ("submitted", ctypes.c_uint64),
                ("_launch", ctypes.c_uint8 * 4), ("sharedMemoryExecuted", ctypes.c_uint32),
                ("graphNodeId", ctypes.c_uint64), ("_rest", ctypes.c_uint8 * 64)]


class ActivityMemcpy6(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("copyKind", ctypes.c_uint8), ("srcKind", ctypes.c_uint8),
                ("dstKind", ctypes.c_uint8), ("flags", ctypes.c_uint8), ("bytes", ctypes.c_uint64),
                ("start", ctypes.c_uint64), ("end", ctypes.c_uint64), ("deviceId", ctypes.c_uint32),
                ("contextId", ctypes.c_uint32), ("streamId", ctypes.c_uint32), ("correlationId", ctypes.c_uint32),
                ("runtimeCorrelationId", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("reserved0", ctypes.c_void_p),
                ("graphNodeId", ctypes.c_uint64), ("graphId", ctypes.c_uint32), ("channelID", ctypes.c_uint32),
                ("channelType", ctypes.c_uint32), ("isDeviceLaunched", ctypes.c_uint8), ("pad2", ctypes.c_uint8 * 3),
                ("copyCount", ctypes.c_uint64)]


class ActivityMemset4(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("value", ctypes.c_uint32), ("bytes", ctypes.c_uint64),
                ("start", ctypes.c_uint64), ("end", ctypes.c_uint64), ("deviceId", ctypes.c_uint32),
                ("contextId", ctypes.c_uint32), ("streamId", ctypes.c_uint32), ("correlationId", ctypes.c_uint32),
                ("flags", ctypes.c_uint16), ("memoryKind", ctypes.c_uint16), ("pad", ctypes.c_uint32),
                ("reserved0", ctypes.c_void_p), ("graphNodeId", ctypes.c_uint64), ("graphId", ctypes.c_uint32),
                ("channelID", ctypes.c_uint32), ("channelType", ctypes.c_uint32), ("isDeviceLaunched", ctypes.c_uint8),
                ("pad2", ctypes.c_uint8 * 3)]


class ActivityAPI(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("cbid", ctypes.c_uint32), ("start", ctypes.c_uint64),
                ("end", ctypes.c_uint64), ("processId", ctypes.c_uint32), ("threadId", ctypes.c_uint32),
                ("correlationId", ctypes.c_uint32), ("returnValue", ctypes.c_uint32)]


class ActivitySynchronization2(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("type", ctypes.c_uint32), ("start", ctypes.c_uint64),
                ("end", ctypes.c_uint64), ("correlationId", ctypes.c_uint32), ("contextId", ctypes.c_uint32),
                ("streamId", ctypes.c_uint32), ("cudaEventId", ctypes.c_uint32), ("cudaEventSyncId", ctypes.c_uint64),
                ("returnValue", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


# kind -> (structure, {output column: structure field}); one definition for both parsers.
LAYOUTS = {
    KIND_CONCURRENT_KERNEL: (ActivityKernel10, {
        "name_ptr": "name", "device": "deviceId", "stream": "streamId", "corr": "correlationId", "start": "start",
        "end": "end", "gx": "gridX", "gy": "gridY", "gz": "gridZ", "bx": "blockX", "by": "blockY", "bz": "blockZ"}),
    KIND_MEMCPY: (ActivityMemcpy6, {
        "copy_kind": "copyKind", "src_kind": "srcKind", "dst_kind": "dstKind", "flags": "flags", "device": "deviceId",
        "stream": "streamId", "bytes": "bytes", "corr": "correlationId", "start": "start", "end": "end"}),
    KIND_MEMSET: (ActivityMemset4, {
        "device": "deviceId", "stream": "streamId", "bytes": "bytes", "corr": "correlationId", "start": "start",
        "end": "end", "memory_kind": "memoryKind", "flags": "flags"}),
    KIND_RUNTIME: (ActivityAPI, {
        "cbid": "cbid", "tid": "threadId", "corr": "correlationId", "start": "start", "end": "end"}),
    KIND_SYNCHRONIZATION: (ActivitySynchronization2, {
        "type": "type", "corr": "correlationId", "start": "start", "end": "end"}),
}
LAYOUTS[KIND_KERNEL] = LAYOUTS[KIND_CONCURRENT_KERNEL]
SIZES = {k: ctypes.sizeof(s) for k, (s, _) in LAYOUTS.items()}
_FMT = {ctypes.c_uint8: "B", ctypes.c_uint16: "H", ctypes.c_uint32: "I", ctypes.c_int32: "i", ctypes.c_uint64: "Q",
        ctypes.c_int64: "q", ctypes.c_void_p: "Q"}
_NP = {"B": np.uint8, "H": np.uint16, "I": np.uint32, "i": np.int32, "Q": np.uint64, "q": np.int64}


def _field_specs():
    """kind -> [(column, byte offset, struct format char)]."""
    out = {}
    for kind, (struct_t, cols) in LAYOUTS.items():
        types = dict(struct_t._fields_)
        out[kind] = [(col, getattr(struct_t, f).offset, _FMT[types[f]]) for col, f in cols.items()]
    return out


FIELDS = _field_specs()
_PROBE = 64
_SCALAR_RUN = 8  # records of a run read one by one before NumPy probes take over


class LayoutError(ValueError):
    """The buffer does not match the CUPTI 13 layouts this module knows."""


def _as_bytes(buf, valid: int) -> memoryview:
    mv = memoryview(buf).cast("B")
    if valid > mv.nbytes:
        raise LayoutError(f"valid size {valid} exceeds the buffer ({mv.nbytes} bytes)")
    if valid % 8:
        raise LayoutError(f"valid size {valid} is not a multiple of 8 (records are 8-byte aligned)")
    return mv[:valid]


def _runs(buf, valid: int, sizes: dict[int, int] | None = None) -> dict[int, tuple[list[int], list[int]]]:
    """kind -> (start byte, record count) of each run of that kind, in buffer order. `sizes`:
    record size per kind (default SIZES; RawBuffers passes what libcupti's own iterator
    showed, see there).

    A run of one kind is followed with scalar reads for its first records and, when it is
    longer, with NumPy probes of growing length; offsets are built per kind in one vectorized
    pass over (start, count) of the runs. A run of one record costs a few scalar reads."""
    sizes = SIZES if sizes is None else sizes
    mv = _as_bytes(buf, valid)
    u32 = np.frombuffer(mv, np.uint32)
    words = mv.cast("I")  # scalar reads: cheaper than NumPy scalar indexing
    runs: dict[int, tuple[list[int], list[int]]] = {}
    o = 0
    while o < valid:
        k = words[o >> 2]
        s = sizes.get(k)
        if s is None:
            raise LayoutError(f"activity kind {k} at byte {o} has no known layout")
        room = (valid - o) // s
        if room == 0:
            raise LayoutError(f"kind {k} record at byte {o} overruns the valid size {valid}")
        n = 1
        while n < room and n < _SCALAR_RUN and words[(o + n * s) >> 2] == k:
            n += 1
        if n == _SCALAR_RUN:
            probe = _PROBE
            while n < room:  # positions o + j*s for j >= n: the run ends at the first other kind
                cnt = min(probe, room - n)
                pos = o + (n + np.arange(cnt, dtype=np.int64)) * s
                other = np.flatnonzero(u32[pos >> 2] != k)
                if other.size:
                    n += int(other[0])
                    break
                n += cnt
                probe *= 4
        starts, counts = runs.setdefault(k, ([], []))
        starts.append(o)
        counts.append(n)
        o += n * s
    if o != valid:
        raise LayoutError(f"records end at byte {o}, the valid size is {valid}")
    return runs


def walk(buf, valid: int, sizes: dict[int, int] | None = None) -> dict[int, np.ndarray]:
    """kind -> byte offsets of its records, in buffer order (see _runs)."""
    sizes = SIZES if sizes is None else sizes
    return {k: _offsets(st, ct, sizes[k]) for k, (st, ct) in _runs(buf, valid, sizes).items()}


def _offsets(starts: list[int], counts: list[int], size: int) -> np.ndarray:
    st, ct = np.asarray(starts, np.int64), np.asarray(counts, np.int64)
    first = np.cumsum(ct) - ct  # index of each run's first record among the kind's records
    idx = np.arange(int(ct.sum()), dtype=np.int64)
    return np.repeat(st, ct) + (idx - np.repeat(first, ct)) * size


_FEW_RUNS = 16  # up to this many runs of a kind, fields are read through strided views of each run


def _record_dtype(kind: int, size: int) -> np.dtype:
    """The fields this module reads, at their offsets, in a record of `size` bytes."""
    fields = FIELDS[kind]
    return np.dtype({"names": [c for c, _, _ in fields], "formats": [_NP[f] for _, _, f in fields],
                     "offsets": [off for _, off, _ in fields], "itemsize": size})


def parse(buf, valid: int, sizes: dict[int, int] | None = None) -> dict[int, dict[str, np.ndarray]]:
    """kind -> {column: int64 array} for every record in the buffer (see LAYOUTS)."""
    sizes = SIZES if sizes is None else sizes
    mv = _as_bytes(buf, valid)
    views = None
    out = {}
    for kind, (starts, counts) in _runs(mv, valid, sizes).items():
        size = sizes[kind]
        if len(starts) <= _FEW_RUNS:  # long runs: a strided view per run, no index arrays
            dt = _record_dtype(kind, size)
            recs = [np.frombuffer(mv, dt, count=n, offset=o) for o, n in zip(starts, counts)]
            arr = recs[0] if len(recs) == 1 else np.concatenate(recs)
            cols = {col: arr[col].astype(np.int64) for col, _, _ in FIELDS[kind]}
        else:  # many short runs: gather each field at the records' offsets
            if views is None:
                views = {c: np.frombuffer(mv, _NP[c]) for c in "BHIiQq"}
            offs = _offsets(starts, counts, size)
            cols = {}
            for col, off, fmt in FIELDS[kind]:
                width = np.dtype(_NP[fmt]).itemsize
                cols[col] = views[fmt][(offs + off) // width].astype(np.int64)
        out[LAYOUT_KIND.get(kind, kind)] = _merge(out.get(LAYOUT_KIND.get(kind, kind)), cols)
    return out


# Kinds that share a layout are reported under one kind (KERNEL records join CONCURRENT_KERNEL's).
LAYOUT_KIND = {KIND_KERNEL: KIND_CONCURRENT_KERNEL}


def _merge(have, cols):
    if have is None:
        return cols
    return {c: np.concatenate([have[c], cols[c]]) for c in have}


def parse_python(buf, valid: int) -> dict[int, dict[str, np.ndarray]]:
    """The same result as parse(), one record at a time with `struct` (the fallback/reference)."""
    mv = _as_bytes(buf, valid)
    rows: dict[int, dict[str, list]] = {}
    o = 0
    while o < valid:
        (k,) = struct.unpack_from("<I", mv, o)
        s = SIZES.get(k)
        if s is None:
            raise LayoutError(f"activity kind {k} at byte {o} has no known layout")
        if o + s > valid:
            raise LayoutError(f"kind {k} record at byte {o} overruns the valid size {valid}")
        dest = rows.setdefault(LAYOUT_KIND.get(k, k), {c: [] for c, _, _ in FIELDS[k]})
        for col, off, fmt in FIELDS[k]:
            dest[col].append(struct.unpack_from("<" + fmt, mv, o + off)[0])
        o += s
    return {k: {c: np.array(v, dtype=np.uint64 if c == "name_ptr" else np.int64).astype(np.int64)
                for c, v in cols.items()} for k, cols in rows.items()}


class NameCache:
    """Kernel name pointer -> name, each distinct pointer read once (CUPTI shares one name per kernel)."""

    def __init__(self, read=ctypes.string_at, limit: int = 1 << 16):
        self._read, self._limit = read, limit
        self._names: dict[int, str] = {}

    def names(self, ptrs: np.ndarray) -> list[str]:
        uniq, inv = self.distinct(ptrs)
        return [uniq[i] for i in inv.tolist()]

    def distinct(self, ptrs: np.ndarray) -> tuple[list[str], np.ndarray]:
        """(names of the distinct pointers, index of each record's name among them)."""
        uniq, inv = np.unique(ptrs, return_inverse=True)
        got = []
        for p in uniq.tolist():
            s = self._names.get(p)
            if s is None:
                s = "<null name>" if p == 0 else self._read(p).decode("utf-8", "replace")
                if len(self._names) < self._limit:
                    self._names[p] = s
            got.append(s)
        return got, inv.reshape(-1)


def ingest(source, buf, valid: int, names: NameCache, cu, sizes: dict[int, int] | None = None) -> int:
    """One raw buffer into a CuptiSource's rings (the raw twin of CuptiSource.ingest): the same
    rows, the same runtime-call filter and sync-thread lookup. Returns the records added;
    LayoutError propagates (the caller counts the buffer as unread). cu: the cupti-python binding."""
    by = parse(buf, valid, sizes)
    added = 0
    k = by.get(KIND_CONCURRENT_KERNEL)
    if k is not None:
        uniq, inv = names.distinct(k["name_ptr"])
        cols = {"name": source._name_ids(uniq)[inv]}  # name ids per distinct kernel, not per record
        cols.update({c: k[c] for c in ("device", "stream", "corr", "start", "end", "gx", "gy", "gz", "bx", "by", "bz")})
        source.kernels.extend(**cols)
        added += len(k["corr"])
    api = None
    r = by.get(KIND_RUNTIME)
    if r is not None:
        uniq, inv = np.unique(r["cbid"], return_inverse=True)
        info = [source._cbid_info(cu, int(c)) for c in uniq.tolist()]  # per distinct cbid
        keep = np.array([not drop for _, _, drop in info], bool)[inv]
        source.runtime_calls_dropped += int((~keep).sum())
        name = np.array([i for i, _, _ in info], np.int64)[inv]
        sync = np.array([s for _, s, _ in info], np.int64)[inv]
        api = (name[keep], r["tid"][keep], r["corr"][keep], r["start"][keep], r["end"][keep], sync[keep])
    s = by.get(KIND_SYNCHRONIZATION)
    if s is not None:
        tid = np.full(len(s["corr"]), -1, np.int64)
        if api is not None and api[0].size:
            _lookup_into(tid, s["corr"], api[2], api[1])
        if (tid < 0).any() and source._recent_n:
            m = min(source._recent_n, len(source._recent_corr))
            _lookup_into(tid, s["corr"], source._recent_corr[:m], source._recent_tid[:m])
        ok = tid >= 0
        source.dropped_sync_without_api += int((~ok).sum())
        tu, tinv = np.unique(s["type"], return_inverse=True)
        sname = np.array([source._name(f"cuda_sync:{_sync_type(cu, int(t))}") for t in tu.tolist()],
                         np.int64)[tinv]
        rows = (sname[ok], tid[ok], s["corr"][ok], s["start"][ok], s["end"][ok], np.ones(int(ok.sum()), np.int64))
        api = rows if api is None else tuple(np.concatenate(p) for p in zip(api, rows))
    if r is not None:
        source._remember(r["corr"], r["tid"])
    if api is not None and api[0].size:
        source.api.extend(**dict(zip(("name", "tid", "corr", "start", "end", "sync"), api)))
        added += int(api[0].size)
    mem = []
    c = by.get(KIND_MEMCPY)
    if c is not None:
        kind = np.where((c["copy_kind"] >= 0) & (c["copy_kind"] < len(MEMCPY_KINDS)), c["copy_kind"], 0)
        mem.append({"kind": kind, "device": c["device"], "stream": c["stream"], "bytes": c["bytes"], "corr": c["corr"],
                    "start": c["start"], "end": c["end"], "src": c["src_kind"], "dst": c["dst_kind"],
                    "flags": c["flags"]})
    z = by.get(KIND_MEMSET)
    if z is not None:
        none = np.full(len(z["corr"]), -1, np.int64)
        mem.append({"kind": none, "device": z["device"], "stream": z["stream"], "bytes": z["bytes"], "corr": z["corr"],
                    "start": z["start"], "end": z["end"], "src": none, "dst": z["memory_kind"],
                    "flags": z["flags"]})
    if mem:
        cols = {n: np.concatenate([m[n] for m in mem]) for n in mem[0]}
        # The ring's columns: raw CUPTI codes, named when the table is built (cupti.py).
        source.memcpy.extend(**{n: v for n, v in cols.items() if n in source.memcpy.cols})
        added += len(cols["corr"])
    source.records += added
    return added


def sizes_from_iterator(next_record, addr: int, valid: int, limit: int = 8192) -> dict[int, set[int]]:
    """Record sizes per kind as libcupti's own iterator walks a buffer: `next_record(addr,
    valid, byref(ptr))` is cuptiActivityGetNextRecord. A record's size is the distance to the
    next one (the last: to the valid end). At most `limit` records are visited."""
    ptr = ctypes.c_void_p(None)
    seen: list[int] = []
    while len(seen) < limit and next_record(addr, valid, ctypes.byref(ptr)) == 0:
        seen.append(int(ptr.value))
    out: dict[int, set[int]] = {}
    for i, p in enumerate(seen):
        end = seen[i + 1] if i + 1 < len(seen) else (addr + valid if len(seen) < limit else None)
        if end is None:
            break
        kind = ctypes.c_uint32.from_address(p).value
        out.setdefault(kind, set()).add(end - p)
    return out


def sizes_for(seen: dict[int, set[int]]) -> tuple[dict[int, int], list[str]]:
    """The record sizes to walk with, given what the iterator showed, and notes on differences.

    CUPTI versions a record by appending fields, so a larger record of a known kind keeps the
    known fields at their offsets: it is walked at its own size and read as the known layout.
    A smaller one, or one kind at two sizes, is not read (its kind is left out of the sizes)."""
    sizes, notes = dict(SIZES), []
    for kind, got in seen.items():
        want = SIZES.get(kind)
        if want is None:
            continue
        if len(got) != 1:
            sizes.pop(kind)
            notes.append(f"kind {kind}: records of sizes {sorted(got)}; not read")
            continue
        (size,) = got
        if size == want:
            continue
        if size % 8:  # field reads assume 8-byte aligned records, as CUPTI writes them
            sizes.pop(kind)
            notes.append(f"kind {kind}: records of {size} bytes are not 8-byte aligned; not read")
            continue
        if size > want:
            sizes[kind] = size
            notes.append(f"kind {kind}: records are {size} bytes, the known layout {want}: its fields read")
        else:
            sizes.pop(kind)
            notes.append(f"kind {kind}: records are {size} bytes, smaller than the known layout ({want}); not read")
    for kind in list(sizes):  # kinds sharing a layout follow its size
        if kind in LAYOUT_KIND and LAYOUT_KIND[kind] in sizes and kind not in seen:
            sizes[kind] = sizes[LAYOUT_KIND[kind]]
    return sizes, notes
