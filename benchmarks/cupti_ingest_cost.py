"""Per-record cost of the CUPTI buffer handling (`CuptiSource.ingest`) on synthetic records.

    python benchmarks/cupti_ingest_cost.py [--records 60000] [--rounds 15] [--json OUT.json]

The buffer imitates a launch-bound PyTorch loop: per kernel, a cudaGetDevice, a
cudaLaunchKernel, the kernel record and a cudaGetLastError (4 records). Records are plain
attribute objects (`types.SimpleNamespace`), not cupti-python's classes, so the absolute
numbers differ from a real buffer's; the binding is substituted as in the tests. Timed in
thread CPU time; the median and minimum over rounds are reported, per record.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workflow_lib.capture.sources import cupti as cupti_mod  # noqa: E402


def _buffer(n_kernels: int, kinds, cbids) -> list:
    # cupti-python gives `kind` and `cbid` as plain ints; so do these records.
    kinds = SimpleNamespace(**{k: int(getattr(kinds, k)) for k in ("RUNTIME", "CONCURRENT_KERNEL")})
    cbids = SimpleNamespace(**{c.name: int(c) for c in cbids})
    out, t0 = [], 10**12
    for i in range(n_kernels):
        c = 1000 + 3 * i
        out.append(SimpleNamespace(kind=kinds.RUNTIME, cbid=cbids.cudaGetDevice_v3020, thread_id=42,
                                   correlation_id=c, start=t0 + i * 300, end=t0 + i * 300 + 20))
        out.append(SimpleNamespace(kind=kinds.RUNTIME, cbid=cbids.cudaLaunchKernel_v7000, thread_id=42,
                                   correlation_id=c + 1, start=t0 + i * 300 + 30, end=t0 + i * 300 + 90))
        out.append(SimpleNamespace(kind=kinds.CONCURRENT_KERNEL, name=f"vectorized_elementwise_kernel<{i % 4}>",
                                   device_id=0, stream_id=7, correlation_id=c + 1, start=t0 + i * 300 + 100,
                                   end=t0 + i * 300 + 103, grid_x=1, grid_y=1, grid_z=1, block_x=128,
                                   block_y=1, block_z=1))
        out.append(SimpleNamespace(kind=kinds.RUNTIME, cbid=cbids.cudaGetLastError_v3020, thread_id=42,
                                   correlation_id=c + 2, start=t0 + i * 300 + 95, end=t0 + i * 300 + 97))
    return out


def measure(records: int, rounds: int, source_cls=None) -> dict:
    from benchmarks.fake_cupti import ActivityKind, FakeCuptiNoFilter, cbid

    source_cls = source_cls or cupti_mod.CuptiSource
    buf = _buffer(records // 4, ActivityKind, cbid)
    mod = sys.modules[source_cls.__module__]
    saved = mod.cupti
    mod.cupti = FakeCuptiNoFilter()
    per = []
    try:
        # One source for all rounds: steady state, kernel and call names already known.
        src = source_cls(1 << 17, 1 << 17, 1 << 6)
        src.ingest(buf)
        for _ in range(rounds):
            t = time.thread_time_ns()
            src.ingest(buf)
            per.append((time.thread_time_ns() - t) / len(buf))
    finally:
        mod.cupti = saved
    return {"records": len(buf), "rounds": rounds, "median_ns_per_record": statistics.median(per),
            "min_ns_per_record": min(per)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.records, args.rounds = 2_000, 2
    res = measure(args.records, args.rounds)
    print(f"ingest: {res['median_ns_per_record']:.0f} ns/record median, {res['min_ns_per_record']:.0f} min "
          f"({res['records']} records x {res['rounds']} rounds)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
