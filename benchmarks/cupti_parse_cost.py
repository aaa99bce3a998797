"""Per-record cost of reading CUPTI activity buffers: cupti-python's record objects against the
raw-buffer parser (workflow_lib/capture/sources/cupti_parse.py), and the buffer size.

    python benchmarks/cupti_parse_cost.py [--rounds 9] [--json OUT.json]

Buffers are real bytes in CUPTI 13's record layouts (the ctypes mirrors in cupti_parse), in
three shapes of a launch-bound PyTorch loop (per kernel: cudaGetDevice, cudaLaunchKernel,
the kernel, cudaGetLastError):
  interleaved  the four records of each launch back to back (runs of 1-2 records: the
               parser's worst case);
  batched      runtime records in blocks of 256 and kernel records in blocks of 256 (how
               CUPTI fills a buffer: API records at call exit, kernel records when collected);
  kernel_only  `cupti_kinds="kernel"`: one run.
Paths, all into a CuptiSource's rings (ingest as the recorder runs it, thread CPU time,
median over rounds, per record):
  binding_ingest     CuptiSource.ingest over prebuilt attribute objects: the part of the
                     binding path that is ours (a lower bound: cupti-python's own object
                     construction per record, under the GIL, comes on top);
  binding_objects    the same plus building one Python object per record (what the binding
                     does before calling us; SimpleNamespace stands in for its classes);
  raw                cupti_parse.ingest over the bytes (the recorder's default parser);
  raw_python         cupti_parse.parse_python, the per-record struct fallback (parse only).
Buffer size: `raw` on the batched and kernel-only shapes for 64 KiB .. 16 MiB buffers, so the
fixed cost per buffer (the callback, the walk's set-up) is visible beside the per-record one.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workflow_lib.capture.sources import cupti as cupti_mod  # noqa: E402
from workflow_lib.capture.sources import cupti_parse as cp  # noqa: E402

NAMES = [ctypes.create_string_buffer(f"void at::native::vectorized_elementwise_kernel<{i}>".encode()) for i in range(4)]


def records(n_kernels: int, shape: str, cbid) -> list:
    """[(kind, ctypes record)] of a launch-bound loop in the given shape."""
    t0 = 10**12
    launches = []
    for i in range(n_kernels):
        c = 1000 + 3 * i
        api = []
        for cb, corr, a, b in ((cbid.cudaGetDevice_v3020, c, 0, 20), (cbid.cudaLaunchKernel_v7000, c + 1, 30, 90),
                               (cbid.cudaGetLastError_v3020, c + 2, 95, 97)):
            r = cp.ActivityAPI(kind=cp.KIND_RUNTIME, cbid=int(cb), threadId=42, correlationId=corr,
                               start=t0 + i * 300 + a, end=t0 + i * 300 + b)
            api.append(r)
        k = cp.ActivityKernel10(kind=cp.KIND_CONCURRENT_KERNEL, deviceId=0, streamId=7, correlationId=c + 1,
                                start=t0 + i * 300 + 100, end=t0 + i * 300 + 103, gridX=1, gridY=1, gridZ=1,
                                blockX=128, blockY=1, blockZ=1, name=ctypes.addressof(NAMES[i % 4]))
        launches.append((api, k))
    if shape == "kernel_only":
        return [k for _, k in launches]
    if shape == "interleaved":
        return [r for api, k in launches for r in (api[0], api[1], k, api[2])]
    out = []
    for j in range(0, len(launches), 256):
        block = launches[j:j + 256]
        out += [r for api, _ in block for r in api] + [k for _, k in block]
    return out


def to_bytes(recs) -> tuple[np.ndarray, int]:
    raw = b"".join(bytes(r) for r in recs)
    buf = np.zeros(len(raw) // 8 + 1, np.uint64).view(np.uint8)
    buf[: len(raw)] = np.frombuffer(raw, np.uint8)
    return buf, len(raw)


def to_objects(recs, ak) -> list:
    out = []
    for r in recs:
        if r.kind == cp.KIND_RUNTIME:
            out.append(SimpleNamespace(kind=int(ak.RUNTIME), cbid=r.cbid, thread_id=r.threadId,
                                       correlation_id=r.correlationId, start=r.start, end=r.end))
        else:
            out.append(SimpleNamespace(kind=int(ak.CONCURRENT_KERNEL), name=ctypes.string_at(r.name).decode(),
                                       device_id=r.deviceId, stream_id=r.streamId, correlation_id=r.correlationId,
                                       start=r.start, end=r.end, grid_x=r.gridX, grid_y=r.gridY, grid_z=r.gridZ,
                                       block_x=r.blockX, block_y=r.blockY, block_z=r.blockZ))
    return out


def _time(fn, rounds: int, n: int) -> float:
    fn()  # steady state: names and cbids known
    per = []
    for _ in range(rounds):
        t = time.thread_time_ns()
        fn()
        per.append((time.thread_time_ns() - t) / n)
    return statistics.median(per)


def measure(rounds: int, n_kernels: int = 15_000) -> dict:
    from benchmarks.fake_cupti import ActivityKind, FakeCuptiNoFilter, cbid

    saved = cupti_mod.cupti
    cupti_mod.cupti = fake = FakeCuptiNoFilter()
    out = {"shapes": {}, "buffer_sizes": {}}
    try:
        src = cupti_mod.CuptiSource(1 << 17, 1 << 17, 1 << 6)
        names = cp.NameCache()
        for shape in ("interleaved", "batched", "kernel_only"):
            recs = records(n_kernels, shape, cbid)
            buf, valid = to_bytes(recs)
            objs = to_objects(recs, ActivityKind)
            n = len(recs)
            res = {"records": n, "bytes": valid,
                   "binding_ingest": _time(lambda: src.ingest(objs), rounds, n),
                   "binding_objects": _time(lambda: src.ingest(to_objects(recs, ActivityKind)), rounds, n),
                   "raw": _time(lambda: cp.ingest(src, buf, valid, names, cu=fake), rounds, n),
                   "raw_python": _time(lambda: cp.parse_python(buf, valid), max(3, rounds // 3), n)}
            out["shapes"][shape] = res
        for shape in ("batched", "kernel_only"):
            recs = records(n_kernels * 4, shape, cbid)
            buf_all, valid_all = to_bytes(recs)
            sizes = {}
            for size in (64 << 10, 512 << 10, 4 << 20, 16 << 20):
                # A buffer of `size` bytes holds whole records; cut the byte stream there.
                cut, o = 0, 0
                offs = sorted((o, k) for k, v in cp.walk(buf_all, valid_all).items() for o in v.tolist())
                for off, k in offs:
                    if off + cp.SIZES[k] > size:
                        break
                    cut = off + cp.SIZES[k]
                n = sum(1 for off, k in offs if off + cp.SIZES[k] <= cut)
                buf = buf_all[:cut].copy()
                sizes[str(size)] = {"records": n, "ns_per_record": _time(lambda: cp.ingest(src, buf, cut, names, cu=fake),
                                                                         rounds, n)}
                sizes[str(size)]["us_per_buffer"] = sizes[str(size)]["ns_per_record"] * n / 1e3
            out["buffer_sizes"][shape] = sizes
    finally:
        cupti_mod.cupti = saved
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--kernels", type=int, default=15_000, help="kernel launches per buffer shape (4 records each)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.kernels = 2, 500
    res = measure(args.rounds, args.kernels)
    print("ns per record (thread CPU, median) | binding_ingest | binding_objects | raw | raw_python | binding_objects / raw")
    for shape, r in res["shapes"].items():
        print(f"{shape:12s} ({r['records']:6d} records) | {r['binding_ingest']:7.0f} | {r['binding_objects']:7.0f} | "
              f"{r['raw']:7.1f} | {r['raw_python']:7.0f} | {r['binding_objects'] / r['raw']:6.1f}x")
    for shape, sizes in res["buffer_sizes"].items():
        for size, r in sizes.items():
            print(f"raw {shape:12s} buffer {int(size) >> 10:6d} KiB: {r['records']:7d} records, "
                  f"{r['ns_per_record']:6.1f} ns/record, {r['us_per_buffer']:8.0f} us/buffer")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
