"""The diagnosis of an N-step incident: this tree's code against another checkout's, same run.

    python benchmarks/diagnose_engine_ratio.py --base /tmp/base [--steps 1000000] [--pairs 3] [--kinds kernels host]

Issue 37 moved the diagnosis onto one engine (all steps of a rank at once for every size); it
must be no slower than the code it replaced. Each side runs in its own child process with its
own `workflow_lib` first on the path (the base checkout's through a link in an empty folder):
it builds the synthetic incident in memory (benchmarks/big_incident.py, this tree's, the same
for both), then times diagnose() into its two tables and record (StepSpool + write_spooled, as
the `diagnose` rule writes). The pairs alternate which side goes first; the ratio (this tree ÷
base) is judged pair by pair: the median of the per-pair ratios with their [min, max], in
wall time and in the child's CPU time (steadier on a loaded machine). Peak
RSS is each child's VmHWM. Prints the load average before each pair: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
sys.path.append(sys.argv[4])
from benchmarks.big_incident import big_incident
from workflow_lib.diagnose import diagnose
from workflow_lib.diagnose.spool import StepSpool, write_spooled
inc = big_incident(int(sys.argv[1]), with_kernels=sys.argv[2] == 'kernels')
t, c = time.perf_counter(), time.process_time()
with StepSpool(sys.argv[3]) as spool:
    rec = diagnose(inc, incident_id='big', snapshot_digest='0' * 64, validate=False, spool=spool)
    write_spooled(sys.argv[3], rec, spool)
secs, cpu = time.perf_counter() - t, time.process_time() - c
hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))
import workflow_lib
print(json.dumps({'seconds': secs, 'cpu_seconds': cpu, 'hwm_kib': hwm, 'code': workflow_lib.__file__}))
"""


def _run(code_dir: Path, steps: int, kind: str, out: Path) -> dict:
    with tempfile.TemporaryDirectory() as link:
        os.symlink(code_dir / "workflow_lib", Path(link) / "workflow_lib")
        # The link first (this side's workflow_lib), this tree after it for benchmarks/.
        env = dict(os.environ, PYTHONPATH=link)
        p = subprocess.run([sys.executable, "-c", CHILD, str(steps), kind, str(out), str(ROOT)], env=env, cwd=link,
                           capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"error: the {code_dir} child failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="a checkout of the code to compare against (e.g. git worktree add /tmp/base 3ae5cf8)")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--kinds", nargs="+", default=["kernels", "host"], choices=["kernels", "host"])
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): this tree against itself, "
                    "2,000 host-only steps, one pair; it runs, its ratio means nothing")
    a = ap.parse_args(argv)
    if a.smoke:
        a.base, a.steps, a.pairs, a.kinds = a.base or str(ROOT), 2000, 1, ["host"]
    if not a.base:
        ap.error("--base is required (a checkout of the code to compare against)")
    base = Path(a.base).resolve()
    for kind in a.kinds:
        ratios, cpu_ratios, new_t, old_t, new_m, old_m = [], [], [], [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(a.pairs):
                load = os.getloadavg()[0]
                order = [("new", ROOT), ("old", base)] if i % 2 == 0 else [("old", base), ("new", ROOT)]
                got = {side: _run(where, a.steps, kind, Path(tmp) / f"{side}{i}.json") for side, where in order}
                ratios.append(got["new"]["seconds"] / got["old"]["seconds"])
                cpu_ratios.append(got["new"]["cpu_seconds"] / got["old"]["cpu_seconds"])
                new_t.append(got["new"]["seconds"])
                old_t.append(got["old"]["seconds"])
                new_m.append(got["new"]["hwm_kib"] / 1024)
                old_m.append(got["old"]["hwm_kib"] / 1024)
                print(f"{kind} pair {i + 1} (load {load:.1f}, {order[0][0]} first): new {new_t[-1]:.2f} s, old {old_t[-1]:.2f} s, "
                      f"ratio {ratios[-1]:.3f} (CPU time {cpu_ratios[-1]:.3f}); peak new {new_m[-1]:.0f} MiB, old {old_m[-1]:.0f} MiB", flush=True)
        print(f"{kind}, {a.steps:,} steps: new/old time {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}] "
              f"over {a.pairs} pairs (CPU time {statistics.median(cpu_ratios):.3f} [{min(cpu_ratios):.3f}, {max(cpu_ratios):.3f}]); new {statistics.median(new_t):.2f} s, old {statistics.median(old_t):.2f} s; "
              f"peak new {statistics.median(new_m):.0f} MiB, old {statistics.median(old_m):.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
