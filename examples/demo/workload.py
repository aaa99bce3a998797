"""Built-in demo: a training-like loop starved by its input queue, with a blocking sync per step.

A producer thread puts one item on a queue every --producer-ms milliseconds. Each step
the consumer waits (span "queue.wait") until the queue holds --min-ready items, takes
them all as its batch, computes (span "compute": matrix products on the GPU through
PyTorch when torch and a GPU are present, NumPy on the CPU otherwise), and every
--sync-every steps blocks until the device is done (span "sync"), as `.item()` or
`torch.cuda.synchronize()` would. Waiting for several items is the queue-starvation
stall of real speculative-decoding trainers; the candidate (`--min-ready 1
--sync-every 0`) removes both causes.

Run under the flight recorder; at the end it snapshots (a workload boundary) into
--incidents-dir/--incident when an incident id is given.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from workflow_lib.capture import FlightRecorder  # noqa: E402


def make_compute(size: int, seed: int):
    try:
        import torch

        if torch.cuda.is_available():
            g = torch.Generator(device="cuda").manual_seed(seed)
            a = torch.randn(size, size, device="cuda", generator=g)
            b = torch.randn(size, size, device="cuda", generator=g)

            def compute(batch: int):
                c = a
                for _ in range(4 + batch):
                    c = torch.tanh(c @ b)
                return c

            return compute, torch.cuda.synchronize, "torch-cuda"
    except ImportError:
        pass
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)

    def compute(batch: int):
        c = a
        for _ in range(2 + batch):
            c = np.tanh(c @ b)
        return c

    return compute, (lambda: None), "numpy-cpu"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--min-ready", type=int, default=4, help="items the consumer waits for before a step")
    p.add_argument("--producer-ms", type=float, default=2.0, help="one item every this many milliseconds")
    p.add_argument("--sync-every", type=int, default=1, help="blocking sync every N steps (0: never)")
    p.add_argument("--size", type=int, default=192, help="matrix size of the per-step compute")
    p.add_argument("--max-batch", type=int, default=8, help="most items one step takes from the queue")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--incident", default=None, help="snapshot into this incident id at the end")
    p.add_argument("--incidents-dir", default="incidents")
    args = p.parse_args(argv)

    compute, sync, backend = make_compute(args.size, args.seed)
    q: queue.Queue = queue.Queue()
    ready = threading.Condition()
    stop = threading.Event()

    def producer():
        while not stop.is_set():
            time.sleep(args.producer_ms / 1000.0)
            with ready:
                q.put(object())
                ready.notify()

    rec = FlightRecorder(incident_id=args.incident, incidents_dir=args.incidents_dir)
    rec.declare_source(os.path.abspath(__file__))
    threading.Thread(target=producer, daemon=True, name="producer").start()
    with rec:
        for step in range(args.steps):
            with rec.step(step):
                with rec.span("queue.wait"):
                    with ready:
                        ready.wait_for(lambda: q.qsize() >= args.min_ready)
                    # A bounded batch: compute grows with the batch, so an unbounded one could
                    # outrun the producer into a feedback loop on a slow or shared CPU.
                    batch = 0
                    while batch < args.max_batch:
                        try:
                            q.get_nowait()
                            batch += 1
                        except queue.Empty:
                            break
                with rec.span("compute"):
                    compute(batch)
                if args.sync_every and step % args.sync_every == 0:
                    with rec.span("sync"):
                        sync()
        stop.set()
        if args.incident:
            path = rec.snapshot("workload_boundary")
            print(f"demo ({backend}): snapshot {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
