"""`stallcase import nsys` + diagnosis of a generated 1M-kernel export vs a bare sqlite3 read of
the same rows, same run.

    python benchmarks/nsys_import.py [--kernels 1000000] [--repeats 3] [--smoke]

Generates (in a child process) an nsys-schema export (benchmarks/nsys_export.py's 2024.5 layout):
--kernels kernels with one cudaLaunchKernel each (correlated), a ProfilerStep#N NVTX range per
100 kernels, a synchronous DtoH copy with its cudaMemcpy per step, and a scheduler switch pair
per step. Then, each in its own child process (times are the work inside the child, imports
excluded; peak memory is the child's VmHWM from /proc/self/status, imports included):
  sqlite3    the floor: a bare stdlib read of the rows the import reads (the same SELECTs with
             fetchmany, nothing converted, the garbage collector off as in the import), i.e.
             what any reader of the file pays
  import     import_nsys (rows to Arrow columns, derivations, checks, Parquet)
  diagnose   import_nsys + diagnose_to_file (every check, rank by rank)
Prints each as the median [min, max] over --repeats back-to-back rounds, and the import's and
the import+diagnosis' time ratios to the bare read (pair by pair, median [min, max]).
--smoke: 20,000 kernels, one round (CI: the script runs and prints its ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(path: Path, kernels: int) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.nsys_export import GPID, create

    db = create(path, "2024.5")
    tid = GPID + 4243
    per_step, dur, gap = 100, 20_000, 2_000
    steps = kernels // per_step
    db.execute("INSERT INTO StringIds VALUES (1, 'void gemm_kernel<float, 128>(float const*, float*, int)'), "
               "(2, 'cudaLaunchKernel_v7000'), (3, 'cudaMemcpy_v3020'), (4, 'python')")
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '')")

    def kernel_rows():
        for i in range(kernels):
            s, t = i // per_step, 1_000_000 + i * (dur + gap) + (i // per_step) * 200_000
            yield (t, t + dur, 0, 1, 7, i + 1, GPID, 1, 1, 128, 1, 1, 256, 1, 1)

    def launch_rows():
        for i in range(kernels):
            t = 1_000_000 + i * (dur + gap) + (i // per_step) * 200_000 - 5_000
            yield (t, t + 3_000, 0, tid, i + 1, 2, 0, None)

    def step_rows():
        for s in range(steps):
            t0 = 1_000_000 + s * per_step * (dur + gap) + s * 200_000 - 10_000
            yield (t0, t0 + per_step * (dur + gap) + 150_000, 59, f"ProfilerStep#{s}", tid)

    def copy_rows():
        for s in range(steps):
            t = 1_000_000 + (s + 1) * per_step * (dur + gap) + s * 200_000
            yield (t, t + 50_000, 0, 1, 7, kernels + s + 1, GPID, 1 << 20, 2, 2, 0)

    def copy_calls():
        for s in range(steps):
            t = 1_000_000 + (s + 1) * per_step * (dur + gap) + s * 200_000 - 20_000
            yield (t, t + 90_000, 0, tid, kernels + s + 1, 3, 0, None)

    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, blockZ) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", kernel_rows())
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", launch_rows())
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", copy_calls())
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "bytes, copyKind, srcKind, dstKind) VALUES (?,?,?,?,?,?,?,?,?,?,?)", copy_rows())
    db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,?,?,?,?)", step_rows())
    db.commit()
    db.close()


# The rows the import reads, as SELECTs (the floor reads exactly these, converting nothing).
FLOOR = [
    'SELECT start, end, deviceId, streamId, correlationId, coalesce(demangledName, shortName, mangledName), '
    'gridX, gridY, gridZ, blockX, blockY, blockZ FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid = ?',
    'SELECT start, end, deviceId, streamId, bytes, correlationId, copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE globalPid = ?',
    'SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid >= ? AND globalTid < ? + 16777216',
    'SELECT start, end, globalTid, text, textId FROM NVTX_EVENTS WHERE globalTid >= ? AND globalTid < ? + 16777216 AND end IS NOT NULL',
]


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def child(mode: str, export: str, work: str) -> None:
    sys.path.insert(0, str(ROOT))
    import sqlite3

    from benchmarks.nsys_export import GPID
    from workflow_lib.diagnose import diagnose_to_file
    from workflow_lib.importers.nsys import import_nsys

    t0 = time.perf_counter()
    rows = 0
    if mode == "sqlite3":
        import gc

        gc.disable()  # as the import does while rows stream: the floor gets the same help
        db = sqlite3.connect(Path(export).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
        for sql in FLOOR:
            cur = db.execute(sql, (GPID,) * sql.count("?"))
            while chunk := cur.fetchmany(65_536):
                rows += len(chunk)
        db.close()
    else:
        out = import_nsys([export], incident_id=f"b{os.getpid()}", incidents_dir=work)
        if mode == "diagnose":
            diagnose_to_file(out, Path(work) / f"d{os.getpid()}.json")
    print(json.dumps({"mode": mode, "s": time.perf_counter() - t0, "peak": _hwm(), "rows": rows}))


def _run(mode: str, export: Path, work: Path) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", mode, str(export), str(work)], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="20,000 kernels, one round")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(*a.child)
        return 0
    if a.smoke:
        a.kernels, a.repeats = 20_000, 1
    with tempfile.TemporaryDirectory(prefix="nsys-bench-") as tmp:
        export = Path(tmp) / "export.sqlite"
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                        f"from benchmarks.nsys_import import generate; from pathlib import Path; generate(Path({str(export)!r}), {a.kernels})"],
                       check=True)
        print(f"generated {a.kernels:,} kernels ({export.stat().st_size / 2**20:.0f} MiB export) in {time.perf_counter() - t:.1f} s; "
              f"load average {os.getloadavg()[0]:.1f}")
        res: dict[str, list[dict]] = {"sqlite3": [], "import": [], "diagnose": []}
        for i in range(a.repeats):
            order = list(res) if i % 2 == 0 else list(reversed(res))
            for mode in order:
                work = Path(tmp) / f"w{i}{mode}"
                work.mkdir()
                res[mode].append(_run(mode, export, work))
        for mode, rs in res.items():
            print(f"{mode:9s} time {_med([r['s'] for r in rs])} s   peak RSS {_med([r['peak'] / 2**20 for r in rs])} MiB"
                  + (f"   ({rs[0]['rows']:,} rows)" if mode == "sqlite3" else ""))
        for mode in ("import", "diagnose"):
            ratios = [r["s"] / f["s"] for r, f in zip(res[mode], res["sqlite3"])]
            print(f"ratio {mode} / bare sqlite3 read: {_med(ratios)}x (per round: {', '.join(f'{x:.2f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
