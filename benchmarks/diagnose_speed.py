"""Kineto import + diagnosis vs Holistic Trace Analysis vs a bare json.loads, same trace, same run.

    python benchmarks/diagnose_speed.py [--events 100000 1000000] [--steps 1000000] [--hta-python PATH]

HTA runs in its own venv: python3 -m venv V && V/bin/pip install holistictraceanalysis==0.5.0 'pandas<3'.

Generates a synthetic Kineto trace of at least --events events (tests/fixtures/kineto/generate.py,
one event per line as Kineto writes them), then runs each contender in its own child process:
  json_loads  read the file and json.loads it (the floor for any JSON reader)
  stallcase   import_kineto + diagnose_dir (streaming parse, Arrow tables, all checks)
  hta         TraceAnalysis(trace_dir) + get_temporal_breakdown (HTA_DISABLE_NS_ROUNDING=1)
Time is the work inside the child (imports excluded); peak memory is the child's VmHWM
(/proc/self/status, read by the child at its end: a fresh exec has its own high-water mark,
while wait4's ru_maxrss would inherit the parent's size at fork), imports included. The trace
is generated in a child process too, so no contender starts from a large parent. Also prints HTA's and stallcase's temporal breakdowns side by side.

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
t = time.perf_counter()
with open(sys.argv[1], 'rb') as fh:
    doc = json.loads(fh.read())
print(json.dumps({'seconds': time.perf_counter() - t, 'events': len(doc['traceEvents']), 'hwm_kib': HWM()}))
""",
    "stallcase": """
import json, sys, time, shutil
from workflow_lib.importers.kineto import import_kineto
from workflow_lib.diagnose import diagnose_dir
from workflow_lib.diagnose.breakdown import temporal_breakdown
from workflow_lib.core.incident import read_incident
t = time.perf_counter()
out = import_kineto([sys.argv[1]], incident_id='bench', incidents_dir=sys.argv[2])
t_import = time.perf_counter() - t
rec = diagnose_dir(out, out_path=out / 'diagnosis.json')
seconds = time.perf_counter() - t
hwm = HWM()
bd = temporal_breakdown(read_incident(out))
print(json.dumps({'seconds': seconds, 'import_seconds': t_import, 'steps': len(rec['steps']), 'breakdown': bd, 'hwm_kib': hwm}))
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


CHILD["steps"] = """
import json, sys, time
from benchmarks.big_incident import big_incident
from workflow_lib.core import records
from workflow_lib.diagnose import diagnose
inc = big_incident(int(sys.argv[1]), with_kernels=sys.argv[2] == 'kernels')
t = time.perf_counter()
rec = diagnose(inc, incident_id='big', snapshot_digest='0' * 64, validate=False)
t_diag = time.perf_counter() - t
records.write_record(sys.argv[3], rec, 'diagnosis')
print(json.dumps({'seconds': time.perf_counter() - t, 'diagnose_seconds': t_diag, 'steps': len(rec['steps']), 'hwm_kib': HWM()}))
"""

HWM_SRC = """
def HWM():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1])
"""


def write_trace(path: Path, events_wanted: int) -> int:
    from tests.fixtures.kineto.generate import synthetic_trace

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
    shutil.rmtree(work / "incidents", ignore_errors=True)  # this script's own output from an earlier run
    res = {"json_loads": run_child("json_loads", sys.executable, [str(trace)], env)}
    n = res["json_loads"]["events"]
    print(f"events: {n}")
    res["stallcase"] = run_child("stallcase", sys.executable, [str(trace), str(work / "incidents")], env)
    res["hta"] = run_child("hta", args.hta_python, [str(trace_dir)], dict(env, HTA_DISABLE_NS_ROUNDING="1", PYTHONPATH=""))
    for name, r in res.items():
        print(f"{name:>10}: {r['seconds']:8.2f} s   peak RSS {r['peak_rss_mib']:8.1f} MiB")
    s, h, j = res["stallcase"], res["hta"], res["json_loads"]
    target = 10 if n >= 500_000 else 3
    print(f"stallcase import {s['import_seconds']:.2f} s, diagnosis of {s['steps']} steps (validated, written) {s['seconds'] - s['import_seconds']:.2f} s; hta parse {h['parse_seconds']:.2f} s")
    print(f"speed vs HTA at {n} events: {h['seconds'] / s['seconds']:.1f}x faster (target >= {target}x)")
    print(f"peak memory vs HTA at {n} events: {s['peak_rss_mib'] / h['peak_rss_mib']:.2f} of HTA's (target <= 0.33)")
    print(f"time vs bare json.loads: {s['seconds'] / j['seconds']:.2f}x")
    ours = s["breakdown"][0]
    for key in ("idle_ns", "compute_ns", "non_compute_ns", "kernel_time_ns"):
        a, b = ours[key], h["breakdown"][key]
        rel = abs(a - b) / b if b else float(a != b)
        print(f"breakdown {key:>15}: stallcase {a:>14} HTA {b:>14} rel diff {rel:.2e}")
    return {"events": n, "results": res}


def bench_steps(steps: int, work: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = {}
    for kind in ("kernels", "host-only"):
        r = run_child("steps", sys.executable, [str(steps), kind, str(work / f"diagnosis-{steps}-{kind}.json")], env)
        (work / f"diagnosis-{steps}-{kind}.json").unlink(missing_ok=True)
        print(f"{steps} steps ({kind}): {r['seconds']:.2f} s (diagnose {r['diagnose_seconds']:.2f} s, validate + write "
              f"{r['seconds'] - r['diagnose_seconds']:.2f} s), {1e6 * r['seconds'] / steps:.0f} us/step, peak RSS {r['peak_rss_mib']:.0f} MiB; "
              f"at this rate 1M steps: {r['seconds'] / steps * 1e6:.0f} s (target < 60 s)")
        out[kind] = r
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--steps", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--hta-python", default="/work/venvs/hta/bin/python")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--write-only", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:  # child mode: generate the trace and exit
        print(write_trace(Path(args.write_only), args.events[0]))
        return 0
    work = Path(args.workdir or tempfile.mkdtemp(prefix="diagnose_speed-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {load()} ({os.cpu_count()} cores)")
    results = {"events": {}, "steps": {}}
    for n in args.events:
        if n > 0:
            results["events"][n] = bench_events(n, args, work)
    for n in args.steps:
        if n > 0:
            results["steps"][n] = bench_steps(n, work)
    print(f"load average at end: {load()}")
    (work / "results.json").write_text(json.dumps(results, indent=2))
    print(f"results: {work / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
