"""Collectives analysis speed: 64 ranks x 2,000 flight-recorder entries, against a bare unpickle.

    .venv/bin/python benchmarks/collectives_speed.py [--ranks 64] [--steps 1000] [--scenario straggler|gpu_error]

Builds synthetic dumps in the real layout (tests/fr_builders.py: per step one world and
one second-group all_reduce, so 2 x steps entries per rank; `gpu_error` hangs the job at
the end, with onlyActive-free full dumps), writes them as pickles, then times, in this
process:
  floor      pickle.loads (or json.loads) of every dump: any reader must at least parse them
  import     stallcase import torch-fr (restricted unpickler, checks, Arrow tables, manifest)
  analyze    analyze_collectives + schema validation (match, counters, attribution, culprits)
Prints each time, the ratio of import+analyze to the floor, and the culprits found.
The target (issue 16: "64 ranks x 2,000 entries analysed in under 10 s on the CI machine") is
the analysis; import+analyze is printed beside it, since the import is a separate stage
(`stallcase import torch-fr`) and its restricted unpickler is the slow part for pickles.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1000, help="entries per rank = 2 x steps")
    ap.add_argument("--scenario", default="gpu_error", choices=["straggler", "gpu_error"])
    ap.add_argument("--format", default="pickle", choices=["pickle", "json"], help="dump files as torch writes them")
    args = ap.parse_args()

    from tests.fr_builders import hang_job, write_dumps
    from workflow_lib.core import records
    from workflow_lib.collectives import analyze_collectives
    from workflow_lib.importers.torch_fr import import_torch_fr
    from workflow_lib.core.incident import read_incident

    h = hang_job(args.ranks, args.scenario, args.ranks - 3, n_steps=args.steps, subgroup=list(range(args.ranks)))
    with tempfile.TemporaryDirectory() as tmp:
        files = write_dumps(Path(tmp) / "dumps", h.dumps, fmt=args.format)
        entries = sum(len(d["entries"]) for d in h.dumps.values())
        # Wall and CPU time of this process: on a shared machine the CPU time is the work.
        clocks = (time.perf_counter, time.process_time)
        t = [c() for c in clocks]
        for f in files:
            (json.loads if args.format == "json" else pickle.loads)(f.read_bytes())
        floor = [c() - t0 for c, t0 in zip(clocks, t)]
        t = [c() for c in clocks]
        out = import_torch_fr(files, incident_id="bench", incidents_dir=Path(tmp) / "incidents")
        t_import = [c() - t0 for c, t0 in zip(clocks, t)]
        t = [c() for c in clocks]
        rec = analyze_collectives([read_incident(out)])
        records.validate(rec, "collectives")
        t_analyze = [c() - t0 for c, t0 in zip(clocks, t)]
    total = [a + b for a, b in zip(t_import, t_analyze)]
    print(f"{len(files)} ranks, {entries} entries ({entries // len(files)} per rank), scenario {args.scenario}, "
          f"{args.format} dumps")
    print("                 wall s   cpu s")
    for name, v in (("parse (floor)", floor), ("import", t_import), ("analyze", t_analyze), ("import+analyze", total)):
        print(f"{name:16s} {v[0]:7.2f} {v[1]:7.2f}")
    print(f"analyze: {rec['summary']['ops']} ops; import+analyze = {total[1] / floor[1]:.1f}x the floor (cpu); "
          f"target < 10 s: analyze {'met' if t_analyze[0] < 10 else 'NOT met'}, "
          f"import+analyze {'met' if total[0] < 10 else 'NOT met'} (wall)")
    print("culprits:", [(c["rank"], c["kind"], c["comm"].split("|")[0], c["seq"]) for c in rec["culprits"]],
          "expected:", h.expected)
    return 0


if __name__ == "__main__":
    sys.exit(main())
