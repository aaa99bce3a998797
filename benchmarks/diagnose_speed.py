"""Kineto import + diagnosis vs Holistic Trace Analysis vs a bare json.loads, same trace, same run.

    python benchmarks/diagnose_speed.py [--events 100000 1000000] [--steps 1000000] [--hta-python PATH]
                                        [--repeats 3] [--hta-repeats 1] [--scale 1 4 16]

HTA runs in its own venv: python3 -m venv V && V/bin/pip install holistictraceanalysis==0.5.0 'pandas<3'.

Generates a synthetic Kineto trace of at least --events events (benchmarks/kineto_trace.py,
one event per line as Kineto writes them), then runs each contender in its own child process:
  json_loads  read the file and json.loads it (the floor for any JSON reader)
  stallcase   import_kineto + diagnose_to_file (streaming parse, Arrow tables, all checks; rank by rank)
  hta         TraceAnalysis(trace_dir) + get_temporal_breakdown (HTA_DISABLE_NS_ROUNDING=1)
Time is the work inside the child (imports excluded); peak memory is the child's VmHWM
(/proc/self/status, read by the child at its end: a fresh exec has its own high-water mark,
while wait4's ru_maxrss would inherit the parent's size at fork), imports included. The trace
is generated in a child process too, so no contender starts from a large parent. Also prints HTA's and stallcase's temporal breakdowns side by side.

--repeats R runs json.loads and stallcase R times each, as R back-to-back pairs (which of the two
goes first alternates, so neither always runs on a cooler cache or a quieter machine); HTA
--hta-repeats times (it takes ~10 minutes per run at 1M events here). Each time and peak is printed
as the median with [min, max] over the repeats. The json.loads ratio is judged pair by pair: the
median of the R per-pair ratios with their [min, max], which for R pairs is a distribution-free
interval for the median pair ratio of coverage 1 - 2 * 0.5**R (93.8% at R = 5: the binomial
order-statistic interval for a median); the target counts only if the upper end meets it. Each
pair's load average (1 min, before it ran) and CPU-time ratio are printed beside it.

--scale K... (peak RSS as the input grows): the 1M-event trace copied to K rank files (rank id
changed in each copy's distributedInfo), so the input is K times the 1M-event trace; stallcase
import + diagnose of all K ranks in one child; prints time, peak RSS and RSS per 1M events.

--steps N (each value, with and without kernels): diagnose a synthetic N-step incident built in
memory column-wise (benchmarks/big_incident.py: host spans + steps + scheduler samples, and with
kernels also runtime API and NVML), record validated and written; target < 60 s at 1M steps.
--steps 0 skips it. Prints the load average before and after: the dev machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = {
    "json_loads": """
import json, sys, time
t, c = time.perf_counter(), time.process_time()
with open(sys.argv[1], 'rb') as fh:
    doc = json.loads(fh.read())
print(json.dumps({'seconds': time.perf_counter() - t, 'cpu_seconds': time.process_time() - c, 'events': len(doc['traceEvents']), 'hwm_kib': HWM()}))
""",
    "stallcase": """
import json, sys, time, shutil
from workflow_lib.importers.kineto import import_kineto
from workflow_lib.diagnose import diagnose_to_file
from workflow_lib.diagnose.breakdown import temporal_breakdown
from workflow_lib.core.incident import read_incident
t, c = time.perf_counter(), time.process_time()
out = import_kineto(sys.argv[1].split(','), incident_id='bench', incidents_dir=sys.argv[2])
t_import = time.perf_counter() - t
rec = diagnose_to_file(out, out / 'diagnosis.json')
seconds, cpu = time.perf_counter() - t, time.process_time() - c
hwm = HWM()
bd = temporal_breakdown(read_incident(out))
print(json.dumps({'seconds': seconds, 'cpu_seconds': cpu, 'import_seconds': t_import, 'steps': rec['summary']['steps'], 'breakdown': bd, 'hwm_kib': hwm}))
""",
    "hta": """
import json, sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t_parse = time.perf_counter() - t
df = a.get_temporal_breakdown(visualize=False)
seconds = time.perf_counter() - t
row = df.iloc[0]
print(json.dumps({'hwm_kib': HWM(), 'seconds': seconds, 'parse_seconds': t_parse, 'breakdown': {
    'idle_ns': int(round(float(row['idle_time(us)']) * 1000)), 'compute_ns': int(round(float(row['compute_time(us)']) * 1000)),
    'non_compute_ns': int(round(float(row['non_compute_time(us)']) * 1000)), 'kernel_time_ns': int(round(float(row['kernel_time(us)']) * 1000))}}))
""",
}


CHILD["steps_write"] = """
import json, sys
from benchmarks.big_incident import big_incident
from workflow_lib.core.incident import write_incident
inc = big_incident(int(sys.argv[1]), with_kernels=sys.argv[2] == 'kernels')
write_incident(sys.argv[3], dict(inc.manifest), inc.tables)
print(json.dumps({'hwm_kib': HWM()}))
"""

CHILD["steps"] = """
import json, sys, time
from workflow_lib.diagnose import diagnose_to_file
t = time.perf_counter()
rec = diagnose_to_file(sys.argv[1], sys.argv[2])  # read rank by rank; the two step tables (every row checked), then the record
print(json.dumps({'seconds': time.perf_counter() - t, 'steps': rec['summary']['steps'], 'hwm_kib': HWM()}))
"""

HWM_SRC = """
def HWM():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1])
"""


def write_trace(path: Path, events_wanted: int) -> int:
    from benchmarks.kineto_trace import synthetic_trace

    per_step = 3 * 100 + 2  # runtime + kernel + flow per launch, one op, one step span
    steps = -(-events_wanted // per_step) + 1
    doc = synthetic_trace(steps=steps, kernels_per_step=100)
    events = doc.pop("traceEvents")
    with open(path, "w", encoding="utf-8") as fh:
        head = json.dumps(doc)[:-1]
        fh.write(head + ',\n  "traceEvents": [\n')
        fh.write(",\n".join("  " + json.dumps(e) for e in events))
        fh.write("\n  ]\n}\n")
    return len(events)


def run_child(name: str, python: str, args: list[str], env: dict) -> dict:
    code = HWM_SRC + CHILD[name]
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    res = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    res["peak_rss_mib"] = res.pop("hwm_kib") / 1024
    return res


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def bench_events(events: int, args, work: Path) -> dict:
    trace_dir = work / f"trace-{events}"
    trace_dir.mkdir(parents=True, exist_ok=True)
    trace = trace_dir / "rank0.json"
    t = time.perf_counter()
    if not trace.exists():
        subprocess.run([sys.executable, __file__, "--events", str(events), "--write-only", str(trace)], check=True)
    print(f"trace: {trace} {trace.stat().st_size / 2**20:.1f} MiB (ready in {time.perf_counter() - t:.1f} s)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs: dict[str, list[dict]] = {"json_loads": [], "stallcase": [], "hta": []}
    pair_load = []
    for rep in range(max(args.repeats, args.hta_repeats)):
        if rep < args.repeats:
            pair_load.append(load_1min())
            for name in (("json_loads", "stallcase") if rep % 2 == 0 else ("stallcase", "json_loads")):
                if name == "json_loads":
                    runs["json_loads"].append(run_child("json_loads", sys.executable, [str(trace)], env))
                else:
                    shutil.rmtree(work / "incidents", ignore_errors=True)  # this script's own output from an earlier run
                    runs["stallcase"].append(run_child("stallcase", sys.executable, [str(trace), str(work / "incidents")], env))
        if rep < args.hta_repeats:
            runs["hta"].append(run_child("hta", args.hta_python, [str(trace_dir)], dict(env, HTA_DISABLE_NS_ROUNDING="1", PYTHONPATH="")))
    runs = {k: v for k, v in runs.items() if v}
    n = runs["json_loads"][0]["events"]
    print(f"events: {n}; repeats: json_loads/stallcase {args.repeats}, hta {args.hta_repeats}")
    res = {name: {"seconds": _med([r["seconds"] for r in v]), "peak_rss_mib": _med([r["peak_rss_mib"] for r in v]),
                  "runs": v, **{k: x for k, x in v[0].items() if k not in ("seconds", "peak_rss_mib")}} for name, v in runs.items()}
    for name, v in runs.items():
        t = [r["seconds"] for r in v]
        m = [r["peak_rss_mib"] for r in v]
        print(f"{name:>10}: {_med(t):8.2f} s [{min(t):.2f}, {max(t):.2f}]   peak RSS {_med(m):8.1f} MiB [{min(m):.1f}, {max(m):.1f}]")
    s, j = res["stallcase"], res["json_loads"]
    s["import_seconds"] = _med([r["import_seconds"] for r in runs["stallcase"]])
    target = 10 if n >= 500_000 else 3
    print(f"stallcase import {s['import_seconds']:.2f} s, diagnosis of {s['steps']} steps (validated, written) {s['seconds'] - s['import_seconds']:.2f} s")
    # Each pair ran back to back, under the same load: the ratio is judged pair by pair.
    pairs = pair_ratios(runs["json_loads"], runs["stallcase"])
    s["json_loads_ratio_pairs"] = pairs
    s["pair_load_1min"] = pair_load
    for i, (a, b) in enumerate(zip(runs["json_loads"], runs["stallcase"])):
        print(f"  pair {i + 1}: load {pair_load[i]:.2f}, json.loads {a['seconds']:.2f} s, stallcase {b['seconds']:.2f} s: "
              f"{pairs[i]:.2f}x (CPU time {b['cpu_seconds']:.2f} / {a['cpu_seconds']:.2f} s = {b['cpu_seconds'] / a['cpu_seconds']:.2f}x)")
    med, lo, hi, cover = ratio_interval(pairs)
    s["json_loads_ratio"] = {"median": med, "min": lo, "max": hi, "coverage": cover}
    print(f"time vs bare json.loads: {med:.2f}x [{lo:.2f}, {hi:.2f}] (median of {len(pairs)} pair ratios [min, max]: a "
          f"{100 * cover:.1f}% interval for the median) (target <= 1.5 by the upper end: {'met' if hi <= 1.5 else 'NOT met'}); "
          f"peak RSS {s['peak_rss_mib'] / j['peak_rss_mib']:.2f} of json.loads'")
    if "hta" not in res:
        print("HTA: not run (--hta-repeats 0)")
        return {"events": n, "results": res}
    h = res["hta"]
    print(f"hta parse {h['parse_seconds']:.2f} s")
    print(f"speed vs HTA at {n} events: {h['seconds'] / s['seconds']:.1f}x faster (target >= {target}x)")
    print(f"peak memory vs HTA at {n} events: {s['peak_rss_mib'] / h['peak_rss_mib']:.2f} of HTA's (target <= 0.33)")
    ours = s["breakdown"][0]
    for key in ("idle_ns", "compute_ns", "non_compute_ns", "kernel_time_ns"):
        a, b = ours[key], h["breakdown"][key]
        rel = abs(a - b) / b if b else float(a != b)
        print(f"breakdown {key:>15}: stallcase {a:>14} HTA {b:>14} rel diff {rel:.2e}")
    return {"events": n, "results": res}


def bench_scale(factors: list[int], args, work: Path) -> dict:
    """Peak RSS of import + diagnose over K copies (ranks) of the 1M-event trace."""
    base = work / "trace-1000000" / "rank0.json"
    base.parent.mkdir(parents=True, exist_ok=True)
    if not base.exists():
        subprocess.run([sys.executable, __file__, "--events", "1000000", "--write-only", str(base)], check=True)
    head = base.open("rb").read(4096)
    marker = b'"rank": 0,'
    if marker not in head:
        raise SystemExit(f"{base}: no {marker!r} in its header to rewrite")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = {}
    for k in factors:
        d = work / f"scale-{k}"
        d.mkdir(exist_ok=True)
        files = []
        for r in range(k):
            f = d / f"rank{r}.json"
            if not f.exists():
                with base.open("rb") as src, f.open("wb") as dst:
                    first = src.read(4096)
                    dst.write(first.replace(marker, f'"rank": {r},'.encode(), 1))
                    shutil.copyfileobj(src, dst, 1 << 20)
            files.append(str(f))
        shutil.rmtree(work / "incidents", ignore_errors=True)
        r = run_child("stallcase", sys.executable, [",".join(files), str(work / "incidents")], env)
        shutil.rmtree(work / "incidents", ignore_errors=True)
        out[k] = r
        print(f"scale {k:>2}x ({k} ranks x 1M events): {r['seconds']:7.1f} s (import {r['import_seconds']:.1f} s), "
              f"{r['steps']} steps, peak RSS {r['peak_rss_mib']:7.1f} MiB ({r['peak_rss_mib'] / k:.0f} MiB per 1M events)")
    if len(out) > 1:
        lo, hi = min(out), max(out)
        print(f"peak RSS {hi}x / {lo}x: {out[hi]['peak_rss_mib'] / out[lo]['peak_rss_mib']:.2f} (flat = 1.0; linear = {hi / lo:.0f}); "
              f"{hi}x under 2 GB: {'met' if out[hi]['peak_rss_mib'] < 2048 else 'NOT met'}")
    return out


def pair_ratios(refs: list[dict], ours: list[dict]) -> list[float]:
    """stallcase's time over json.loads' time, pair by pair (pair i = the i-th run of each)."""
    if len(refs) != len(ours):
        raise ValueError(f"{len(refs)} json.loads runs against {len(ours)} stallcase runs: not pairs")
    return [b["seconds"] / a["seconds"] for a, b in zip(refs, ours)]


def ratio_interval(pairs: list[float]) -> tuple[float, float, float, float]:
    """(median, min, max, coverage) of per-pair ratios. [min, max] of n independent pairs holds
    the median pair ratio with probability 1 - 2 * 0.5**n (the binomial order-statistic
    interval for a median; distribution-free): 0 for one pair, 93.75% for five."""
    if not pairs:
        raise ValueError("no pairs")
    return _med(pairs), min(pairs), max(pairs), 1 - 2 * 0.5 ** len(pairs)


def load_1min() -> float:
    return float(open("/proc/loadavg").read().split()[0])


def _med(v: list[float]) -> float:
    v = sorted(v)
    return 0.5 * (v[(len(v) - 1) // 2] + v[len(v) // 2])


def bench_steps(steps: int, work: Path) -> dict:
    """A synthetic N-step incident written to a directory (one child), then diagnosed from it
    as the writers do (diagnose_to_file, another child: its own peak RSS)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = {}
    for kind in ("kernels", "host-only"):
        inc = work / f"incident-{steps}-{kind}"
        run_child("steps_write", sys.executable, [str(steps), kind, str(inc)], env)
        r = run_child("steps", sys.executable, [str(inc), str(inc / "diagnosis.json")], env)
        shutil.rmtree(inc, ignore_errors=True)
        # Against the code it replaced, in one run: benchmarks/diagnose_engine_ratio.py --base.
        per = r["seconds"] / steps
        print(f"{steps} steps ({kind}): diagnose + write {r['seconds']:.2f} s, {1e6 * per:.1f} us/step, "
              f"peak RSS {r['peak_rss_mib']:.0f} MiB (targets at 1M steps: < 60 s, < 2048 MiB)")
        out[kind] = r
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--steps", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--hta-python", default="/work/venvs/hta/bin/python")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hta-repeats", type=int, default=1)
    ap.add_argument("--scale", type=int, nargs="*", default=[])
    ap.add_argument("--write-only", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers "
                    "mean nothing (no HTA)")
    args = ap.parse_args()
    if args.smoke:
        global REFERENCE_STEPS
        REFERENCE_STEPS = 300
        args.events, args.steps, args.repeats, args.hta_repeats, args.scale = [3_000], [600], 1, 0, []
    if args.write_only:  # child mode: generate the trace and exit
        print(write_trace(Path(args.write_only), args.events[0]))
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="diagnose_speed-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {load()} ({os.cpu_count()} cores)")
    results = {"events": {}, "steps": {}, "scale": {}}
    for n in args.events:
        if n > 0:
            results["events"][n] = bench_events(n, args, work)
    if args.scale:
        results["scale"] = bench_scale(args.scale, args, work)
    for n in args.steps:
        if n > 0:
            results["steps"][n] = bench_steps(n, work)
    print(f"load average at end: {load()}")
    (work / "results.json").write_text(json.dumps(results, indent=2))
    print(f"results: {work / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
