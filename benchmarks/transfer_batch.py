"""transfer_stall over all steps of a rank at once: time per step, and the set operations under it.

    python benchmarks/transfer_batch.py [--steps 100000] [--repeats 3]

Builds benchmarks/copies_incident.py's incident (every step has copies: pageable, DtoH packs,
.item() reads with their op spans, memsets, side-stream prefetches, copies without a call),
then times transfer_stall.check_steps on all --steps steps and prints the time per step;
times are CPU seconds of this process (time.process_time: on the shared machine others' load
stretches wall time, not these), the least of --repeats runs; wall seconds too.
The per-step reference (tests/reference_diagnosis) is no longer timed here: a benchmark does not
import a test module (docs/import_graph.py --check), there is one engine, and the answers' equality
with the reference is tests/test_diagnose_batch_transfer.py's job on this same incident.
Also times measures.intersect and subtract on the rank's pieces, binary searches (measures._meet)
against the sorted sweep, and exits 1 when the two disagree. Prints the load average before and
after: the dev machine is shared. Target: well under 3 us a step.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks.copies_incident import copies_incident  # noqa: E402
from workflow_lib.diagnose import batch, evidence, measures  # noqa: E402
from workflow_lib.diagnose.checks import transfer_stall  # noqa: E402
from workflow_lib.diagnose.types import DiagnoseOptions  # noqa: E402
from workflow_lib.diagnose.checks import warm_up as warmup  # noqa: E402


def steps_input(inc) -> batch.StepsInput:
    """The rank's StepsInput as diagnose builds it (one rank, all steps)."""
    opts = DiagnoseOptions()
    st = inc.tables["steps"]
    origin = int(np.min(st["start_ns"].to_numpy()))
    ev = evidence.build(inc, -1, origin, opts.wait_regex())
    starts = st["start_ns"].to_numpy() - origin
    ends = st["end_ns"].to_numpy() - origin
    frame = batch.StepFrame(st["step_id"].to_numpy(), st["thread_id"].to_numpy(), starts, ends)
    return batch.StepsInput(frame, batch.make_base(frame, ev, opts.min_gap_ns), evidence.RankInput(ev, evidence.sources_of(inc), opts),
                            warmup.cold_steps(ends - starts, opts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    a = ap.parse_args()
    if a.smoke:
        a.steps, a.repeats = 2_000, 1
    print(f"load average before: {os.getloadavg()}")
    inc = copies_incident(a.steps)
    si = steps_input(inc)
    t_fast = wall_fast = float("inf")
    for _ in range(a.repeats):
        t, w = time.process_time(), time.perf_counter()
        fast = transfer_stall.check_steps(si)
        t_fast, wall_fast = min(t_fast, time.process_time() - t), min(wall_fast, time.perf_counter() - w)
    per_fast = t_fast / a.steps * 1e6
    print(f"check_steps, {a.steps} steps: {t_fast:.3f} s CPU = {per_fast:.2f} us/step (wall {wall_fast:.3f} s; "
          f"{int((fast.verdict == batch.ATTRIBUTED).sum())} attributed)")
    same = True
    # The set operations under every batched check: unions in order by binary searches
    # (measures._meet) against the sweep over all sorted boundaries, on this rank's pieces.
    no_compute = si.frame.pieces(measures.subtract(si.frame.windows, si.rank.ev.kernel_busy))
    busy = si.frame.pieces(si.rank.ev.busy)
    for word, keep in (("intersect", True), ("subtract", False)):
        t = time.process_time()
        slow = measures._sweep_np(no_compute, busy, keep)
        t_sweep = time.process_time() - t
        t = time.process_time()
        quick = measures._sweep(no_compute, busy, keep)
        t_meet = time.process_time() - t
        same = same and slow.start_ns.tolist() == quick.start_ns.tolist() and slow.end_ns.tolist() == quick.end_ns.tolist()
        print(f"measures.{word}, {len(no_compute)} and {len(busy)} pieces: sweep {t_sweep:.3f} s, binary searches "
              f"{t_meet:.3f} s: {t_sweep / t_meet:.1f}x")
    print(f"load average after: {os.getloadavg()}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
