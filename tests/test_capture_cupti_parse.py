"""The raw CUPTI buffer parser on CPU, against real bytes: buffers built from ctypes mirrors of
CUPTI 13's records, parsed by the vectorized path and by the per-record pure-Python path,
checked field by field against the values written (and the layouts against the header)."""

from __future__ import annotations

import ctypes
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from workflow_lib.capture.sources import cupti_parse as cp

HEADER_DIR = Path("/usr/local/cuda-13.0/include")


def _buffer(kinds: list[int], seed: int = 1):
    """A CUPTI-shaped buffer (records back to back, 8-byte aligned) and what each record holds."""
    rnd = random.Random(seed)
    names = [ctypes.create_string_buffer(f"kernel_{i}<float>".encode()) for i in range(5)]
    recs, expect = [], []
    for k in kinds:
        struct_t, cols = cp.LAYOUTS[k]
        r = struct_t()
        r.kind = k
        want = {}
        for col, field in cols.items():
            if col == "name_ptr":
                v = ctypes.addressof(names[rnd.randrange(len(names))])
            else:
                ctype = dict(struct_t._fields_)[field]
                bits = ctypes.sizeof(ctype) * 8
                signed = ctype in (ctypes.c_int32, ctypes.c_int64)
                v = rnd.randrange(-(1 << (bits - 2)), 1 << (bits - 2)) if signed else rnd.randrange(0, 1 << min(bits, 62))
            setattr(r, field, v)
            want[col] = v
        recs.append(r)
        expect.append((cp.LAYOUT_KIND.get(k, k), want))
    raw = b"".join(bytes(r) for r in recs)
    buf = np.zeros(len(raw) + 4096, np.uint8)  # a larger buffer than the valid part, as CUPTI's are
    buf[: len(raw)] = np.frombuffer(raw, np.uint8)
    return buf, len(raw), expect, names


def _check(parsed, expect):
    by_kind: dict[int, list[dict]] = {}
    for k, want in expect:
        by_kind.setdefault(k, []).append(want)
    assert set(parsed) == set(by_kind)
    for k, rows in by_kind.items():
        for col in rows[0]:
            got = parsed[k][col]
            assert got.dtype == np.int64 and len(got) == len(rows)
            assert got.tolist() == [np.int64(np.uint64(r[col])).item() if r[col] >= 0 else r[col] for r in rows], (k, col)


MIXED = ([cp.KIND_RUNTIME] * 3 + [cp.KIND_CONCURRENT_KERNEL] * 200 + [cp.KIND_MEMCPY, cp.KIND_MEMSET]
         + [cp.KIND_RUNTIME, cp.KIND_CONCURRENT_KERNEL] * 40 + [cp.KIND_SYNCHRONIZATION] * 2 + [cp.KIND_KERNEL]
         + [cp.KIND_MEMCPY] * 70)


@pytest.mark.parametrize("kinds", [MIXED, [cp.KIND_CONCURRENT_KERNEL] * 1000, [cp.KIND_MEMCPY]], ids=["mixed", "kernel_only", "one"])
def test_vectorized_and_pure_python_paths_read_every_field_written(kinds):
    buf, valid, expect, _names = _buffer(kinds)
    fast, slow = cp.parse(buf, valid), cp.parse_python(buf, valid)
    _check(fast, expect)
    _check(slow, expect)
    for k in fast:
        for col in fast[k]:
            assert np.array_equal(fast[k][col], slow[k][col])


def test_memcpy_records_carry_source_and_destination_memory_and_the_async_flag():
    buf, valid, expect, _ = _buffer([cp.KIND_MEMCPY])
    r = cp.ActivityMemcpy6.from_buffer(buf)
    r.srcKind, r.dstKind, r.flags, r.copyKind = 1, 3, cp.MEMCPY_FLAG_ASYNC, 1  # pageable -> device, async, HtoD
    m = cp.parse(buf, valid)[cp.KIND_MEMCPY]
    assert (m["src_kind"][0], m["dst_kind"][0], m["flags"][0] & cp.MEMCPY_FLAG_ASYNC, m["copy_kind"][0]) == (1, 3, 1, 1)
    assert cp.MEMORY_KINDS[int(m["src_kind"][0])] == "pageable"


def test_kernel_names_are_read_once_per_distinct_pointer():
    buf, valid, expect, names = _buffer([cp.KIND_CONCURRENT_KERNEL] * 50)
    reads = []
    cache = cp.NameCache(read=lambda p: reads.append(p) or ctypes.string_at(p))
    ptrs = cp.parse(buf, valid)[cp.KIND_CONCURRENT_KERNEL]["name_ptr"]
    got = cache.names(ptrs)
    assert got == [ctypes.string_at(int(p)).decode() for p in ptrs] and all(g.startswith("kernel_") for g in got)
    assert len(reads) == len(set(ptrs.tolist())) <= len(names)
    cache.names(ptrs)
    assert len(reads) == len(set(ptrs.tolist()))  # cached


@pytest.mark.parametrize("parser", [cp.parse, cp.parse_python], ids=["vectorized", "python"])
def test_a_buffer_that_does_not_match_the_layouts_is_refused(parser):
    buf, valid, _, _ = _buffer([cp.KIND_RUNTIME, cp.KIND_CONCURRENT_KERNEL])
    with pytest.raises(cp.LayoutError, match="overruns|end at|no known layout"):
        parser(buf, valid - 8)  # the kernel record cut short
    buf[40:44] = np.frombuffer(np.uint32(77).tobytes(), np.uint8)  # the second record's kind: unknown
    with pytest.raises(cp.LayoutError, match="kind 77 at byte 40"):
        parser(buf, valid)


def test_an_empty_buffer_has_no_records():
    assert cp.parse(np.zeros(64, np.uint8), 0) == {} == cp.parse_python(np.zeros(64, np.uint8), 0)


@pytest.mark.skipif(not (HEADER_DIR / "cupti_activity.h").exists() or shutil.which("gcc") is None,
                    reason="needs CUDA 13's cupti_activity.h and gcc; the layouts are otherwise checked by the tests above")
def test_layouts_match_the_cupti_header(tmp_path):
    names = {cp.ActivityKernel10: "CUpti_ActivityKernel10", cp.ActivityMemcpy6: "CUpti_ActivityMemcpy6",
             cp.ActivityMemset4: "CUpti_ActivityMemset4", cp.ActivityAPI: "CUpti_ActivityAPI",
             cp.ActivitySynchronization2: "CUpti_ActivitySynchronization2"}
    lines, want = [], []
    for struct_t, cname in names.items():
        lines.append(f'printf("%zu\\n", sizeof({cname}));')
        want.append(ctypes.sizeof(struct_t))
        for f in dict(cp.LAYOUTS[next(k for k, (s, _) in cp.LAYOUTS.items() if s is struct_t)][1]).values():
            lines.append(f'printf("%zu\\n", offsetof({cname}, {f}));')
            want.append(getattr(struct_t, f).offset)
    src = tmp_path / "off.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <cupti_activity.h>\nint main(void){\n"
                   + "\n".join(lines) + "\nreturn 0;}\n")
    subprocess.run(["gcc", f"-I{HEADER_DIR}", str(src), "-o", str(tmp_path / "off")], check=True)
    out = subprocess.run([str(tmp_path / "off")], check=True, capture_output=True, text=True).stdout.split()
    assert [int(x) for x in out] == want


def test_a_raw_buffer_fills_the_same_rings_as_the_binding_objects(monkeypatch):
    """The raw ingest and CuptiSource.ingest (cupti-python's record objects) give the same rows."""
    from types import SimpleNamespace

    from workflow_lib.capture.sources import cupti as cupti_mod
    from test_capture_cupti import FakeCupti

    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    monkeypatch.setattr(cupti_mod, "_API_NAMES", {})  # cbid names of this fake stay in this test
    kinds = [cp.KIND_RUNTIME, cp.KIND_CONCURRENT_KERNEL] * 30 + [cp.KIND_MEMCPY] * 3
    buf, valid, expect, _names = _buffer(kinds, seed=3)
    objs = []
    for o in cp.walk(buf, valid)[cp.KIND_RUNTIME]:  # runtime cbids and thread ids of a plausible size
        rec = cp.ActivityAPI.from_buffer(buf, int(o))
        rec.cbid %= 300
        rec.threadId %= 1 << 30
    src_a = cupti_mod.CuptiSource(1024, 1024, 1024)
    src_b = cupti_mod.CuptiSource(1024, 1024, 1024)
    n_raw = cp.ingest(src_a, buf, valid, cp.NameCache(), cu=fake)
    ak = fake.ActivityKind
    walk = cp.walk(buf, valid)
    for kind, offs in sorted(walk.items()):
        struct_t, _ = cp.LAYOUTS[kind]
        for o in offs.tolist():
            r = struct_t.from_buffer(buf, o)
            if kind == cp.KIND_RUNTIME:
                objs.append((o, SimpleNamespace(kind=int(ak.RUNTIME), cbid=r.cbid, thread_id=r.threadId,
                                                correlation_id=r.correlationId, start=r.start, end=r.end)))
            elif kind == cp.KIND_CONCURRENT_KERNEL:
                objs.append((o, SimpleNamespace(kind=int(ak.CONCURRENT_KERNEL), name=ctypes.string_at(r.name).decode(),
                                                device_id=r.deviceId, stream_id=r.streamId, correlation_id=r.correlationId,
                                                start=r.start, end=r.end, grid_x=r.gridX, grid_y=r.gridY, grid_z=r.gridZ,
                                                block_x=r.blockX, block_y=r.blockY, block_z=r.blockZ)))
            else:
                objs.append((o, SimpleNamespace(kind=int(ak.MEMCPY), copy_kind=r.copyKind, device_id=r.deviceId,
                                                stream_id=r.streamId, bytes=r.bytes, correlation_id=r.correlationId,
                                                start=r.start, end=r.end, src_kind=r.srcKind, dst_kind=r.dstKind,
                                                flags=r.flags)))
    src_b.ingest([o for _, o in sorted(objs, key=lambda t: t[0])])
    assert n_raw == src_b.records > 0
    for ring in ("kernels", "api", "memcpy"):
        a, b = getattr(src_a, ring).copy().columns, getattr(src_b, ring).copy().columns
        for col in b:
            if col == "name":  # ids per name: compare the names
                assert [src_a.name_list[i] for i in a[col]] == [src_b.name_list[i] for i in b[col]]
            elif col != "seq":
                assert np.array_equal(a[col], b[col]), (ring, col)


def _lib():
    import ctypes.util

    for name in ("/usr/local/cuda-13.0/lib/libcupti.so.13", ctypes.util.find_library("cupti")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
    return None


def test_raw_buffers_go_from_cupti_through_the_pool_into_the_rings(monkeypatch):
    """The ctypes callbacks as CUPTI calls them: a buffer requested, records written into it,
    the buffer completed with its valid size; then the pool reuses it. With libcupti present
    (no GPU needed) the callbacks are also registered with it."""
    from workflow_lib.capture.sources import cupti as cupti_mod
    from workflow_lib.capture.sources import cupti_raw
    from test_capture_cupti import FakeCupti

    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    src = cupti_mod.CuptiSource(4096, 4096, 4096)
    lib = _lib()
    raw = cupti_raw.RawBuffers(src, lib, 1 << 16, fake)
    if lib is not None:
        raw.register()
    rec_buf, valid, expect, names = _buffer([cp.KIND_CONCURRENT_KERNEL] * 40 + [cp.KIND_MEMCPY] * 2, seed=5)
    for _ in range(3):
        p, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        raw._req(ctypes.byref(p), ctypes.byref(size), ctypes.byref(most))
        assert size.value == 1 << 16 and p.value % 8 == 0 and most.value == 0
        ctypes.memmove(p.value, rec_buf.ctypes.data, valid)
        raw._cmp(None, 0, p.value, size.value, valid)
    assert src.kernels.written == 120 and src.memcpy.written == 6 and raw.buffers == 3 and raw.unread == 0
    assert len(raw._free) == cupti_raw.POOL_BUFFERS and not raw._out
    raw.zeroed = True  # as where CUPTI accepted the attribute: a read buffer goes back cleared
    p, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    raw._req(ctypes.byref(p), ctypes.byref(size), ctypes.byref(most))
    ctypes.memmove(p.value, rec_buf.ctypes.data, valid)
    raw._cmp(None, 0, p.value, size.value, valid)
    assert not any(b.any() for b in raw._free) and src.kernels.written == 160
    raw.zeroed = False
    p, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    raw._req(ctypes.byref(p), ctypes.byref(size), ctypes.byref(most))
    ctypes.memmove(p.value, np.full(16, 0xFF, np.uint8).ctypes.data, 16)  # kind 0xFFFFFFFF
    raw._cmp(None, 0, p.value, size.value, 16)
    assert raw.unread == 1 and "layout" in src.errors[-1]


def test_the_fake_binding_keeps_the_binding_parser(tmp_path, monkeypatch):
    from workflow_lib.capture import FlightRecorder
    from workflow_lib.capture.sources import cupti as cupti_mod
    from test_capture_cupti import FakeCupti

    monkeypatch.setattr(cupti_mod, "cupti", FakeCupti())
    rec = FlightRecorder(incident_id="r", incidents_dir=str(tmp_path), sources=("host", "cupti"), cupti_kinds="kernel")
    with rec:
        pass
    assert rec.cupti.parser_used == "binding" and "not reachable" in rec.cupti.parser_note
    assert rec.cupti.enabled_kinds == [] and rec.cupti.kinds == ("CONCURRENT_KERNEL",)


@pytest.mark.skipif(_lib() is None, reason="needs a libcupti (CUDA 13's; no GPU needed): its own record iterator")
def test_libcuptis_own_iterator_walks_the_buffer_as_we_do():
    """cuptiActivityGetNextRecord of the real libcupti visits the same records at the same
    offsets as cupti_parse.walk: the record sizes are libcupti's."""
    lib = _lib()
    nxt = lib.cuptiActivityGetNextRecord
    nxt.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    buf, valid, _, _ = _buffer(MIXED)
    base = buf.ctypes.data
    ptr, offs = ctypes.c_void_p(None), []
    while nxt(base, valid, ctypes.byref(ptr)) == 0:
        offs.append(ptr.value - base)
    assert offs == sorted(o for v in cp.walk(buf, valid).values() for o in v.tolist())
    seen = cp.sizes_from_iterator(nxt, base, valid)
    assert {k: v for k, v in seen.items()} == {k: {cp.SIZES[k]} for k in set(MIXED)}
    assert cp.sizes_for(seen) == (cp.SIZES, [])


def test_sizes_learned_from_a_newer_cupti_keep_known_fields_and_refuse_smaller_records():
    grown = cp.SIZES[cp.KIND_CONCURRENT_KERNEL] + 16
    sizes, notes = cp.sizes_for({cp.KIND_CONCURRENT_KERNEL: {grown}, cp.KIND_RUNTIME: {32}, cp.KIND_MEMCPY: {96, 104}})
    assert sizes[cp.KIND_CONCURRENT_KERNEL] == grown and sizes[cp.KIND_KERNEL] == grown
    assert cp.KIND_RUNTIME not in sizes and cp.KIND_MEMCPY not in sizes and len(notes) == 3
    assert cp.KIND_MEMSET not in cp.sizes_for({cp.KIND_MEMSET: {92}})[0]  # not 8-byte aligned
    # A buffer of the grown records walks at their size and reads the known fields.
    recs = [bytes(r) + bytes(16) for r in (cp.ActivityKernel10(kind=cp.KIND_CONCURRENT_KERNEL, correlationId=i, start=i,
                                                                end=i + 1) for i in range(5))]
    raw = np.frombuffer(b"".join(recs), np.uint8).copy()
    got = cp.parse(raw, raw.size, sizes)[cp.KIND_CONCURRENT_KERNEL]
    assert got["corr"].tolist() == list(range(5)) and got["end"].tolist() == list(range(1, 6))
    with pytest.raises(cp.LayoutError):
        cp.parse(raw, raw.size)  # at the known size the walk does not fit
