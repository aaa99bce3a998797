"""Built-in demo: a training-like loop starved by its input queue, with a blocking sync per step.

--producers threads each put one item on a queue every --producer-ms milliseconds (the
input pipeline: think DataLoader workers). Each step the consumer waits (span
"queue.wait") until the queue holds --min-ready items and takes exactly that many as its
batch, computes (span "compute": matrix products on the GPU through PyTorch when torch
and a GPU are present, NumPy on the CPU otherwise), and every --sync-every steps blocks
until the device is done (span "sync"), as `.item()` or `torch.cuda.synchronize()` would.
Every step does the same work (--min-ready items, declared to the recorder), so a faster
step is a real speedup: the candidate (`--producers 4 --sync-every 0`) feeds the queue
four times as fast and drops the sync, as more loader workers and no per-step `.item()`
would.

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


def gpu_visible() -> bool:
    """Whether NVML counts a GPU. Importing torch costs seconds, paid by every trial run, so
    a machine without a GPU goes straight to NumPy."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()) > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver or no libnvidia-ml: a CPU machine
        return False


def make_compute(size: int, seed: int):
    try:
        if not gpu_visible():
            raise ImportError("no GPU: NumPy on the CPU")
        import torch

        if torch.cuda.is_available():
            g = torch.Generator(device="cuda").manual_seed(seed)
            a = torch.randn(size, size, device="cuda", generator=g)
            b = torch.randn(size, size, device="cuda", generator=g)

            def compute(batch: int):
                c = a
                for _ in range(batch):
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
        for _ in range(batch):
            c = np.tanh(c @ b)
        return c

    return compute, (lambda: None), "numpy-cpu"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--min-ready", type=int, default=4, help="items per step: the consumer waits for them, then takes them")
    p.add_argument("--producers", type=int, default=1, help="producer threads (input pipeline workers)")
    p.add_argument("--producer-ms", type=float, default=2.0, help="each producer makes one item every this many milliseconds")
    p.add_argument("--sync-every", type=int, default=1, help="blocking sync every N steps (0: never)")
    p.add_argument("--size", type=int, default=192, help="matrix size of the per-step compute")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--incident", default=None, help="snapshot into this incident id at the end")
    p.add_argument("--incidents-dir", default="incidents")
    args = p.parse_args(argv)

    compute, sync, backend = make_compute(args.size, args.seed)
    # Warm the backend before the input pipeline starts: on a GPU the first products pay the
    # CUDA context and cuBLAS's set-up (~0.2 s on the H200), during which the producers would
    # fill the queue with ~100 items and the run's steps would find their batch waiting: the
    # demo's starved input would not be starved (measured: 0.2 ms steps, an inconclusive verdict).
    compute(args.min_ready)
    sync()
    q: queue.Queue = queue.Queue()
    ready = threading.Condition()
    stop = threading.Event()

    def producer():
        while not stop.is_set():
            time.sleep(args.producer_ms / 1000.0)
            with ready:
                q.put(object())
                ready.notify()

    # On a GPU the demo records CUPTI on every step (mode "cupti"): it is 30 steps long and
    # exists to show the evidence, so its report has kernel sum, GPU busy and host API for the
    # slow steps and the typical ones alike. A program that names no mode gets the default, GPU
    # evidence in windows (docs/capture.md), within the recorder's 1% budget.
    rec = FlightRecorder(incident_id=args.incident, incidents_dir=args.incidents_dir,
                         mode="cupti" if backend == "torch-cuda" else None)
    rec.declare_source(os.path.abspath(__file__))
    for k in range(max(1, args.producers)):
        threading.Thread(target=producer, daemon=True, name=f"producer-{k}").start()
    with rec:
        for step in range(args.steps):
            with rec.step(step, items=args.min_ready):
                with rec.span("queue.wait"):
                    with ready:
                        ready.wait_for(lambda: q.qsize() >= args.min_ready)
                    for _ in range(args.min_ready):  # the same batch every step: equal work
                        q.get_nowait()
                with rec.span("compute"):
                    compute(args.min_ready)
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
