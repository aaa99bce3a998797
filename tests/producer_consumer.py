"""A user's own producer/consumer job, in its own git repository: producer processes pack
"hidden states" onto a multiprocessing queue, consumer processes train on them once enough
are waiting (`--min-ready`). Each process records itself the README's way (its own
FlightRecorder, RANK set as torchrun would, a role). Packing is slow; one producer cannot
keep two consumers fed, so the consumers wait on the queue: more producers is the fix.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

FILES = {
    "hidden.py": '''
        """What a producer makes: a packed hidden state."""
        import time

        import numpy as np


        def pack(index, width=64):
            x = np.random.default_rng(index).standard_normal((width, width)).astype(np.float32)
            time.sleep(0.008)  # the producer's forward pass and packing
            return (x @ x.T).sum(axis=0)
    ''',
    "workers.py": '''
        """The two kinds of process; each records itself under one incident id."""
        import os
        import queue as queue_mod
        import time

        from workflow_lib.capture import FlightRecorder

        import hidden

        INCIDENT = "pc-0412"


        def producer(rank, world, q, stop):
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
            q.cancel_join_thread()  # items left on the queue at the end are not waited for
            rec = FlightRecorder(incident_id=INCIDENT, role="producer", sources=("host",))
            with rec:
                i = 0
                while not stop.is_set():
                    with rec.step(i):
                        with rec.span("pack"):
                            item = hidden.pack(rank * 100000 + i)
                        q.put(item)
                    i += 1
                rec.snapshot("workload_boundary")


        def consumer(rank, world, q, steps, min_ready, done):
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
            rec = FlightRecorder(incident_id=INCIDENT, role="consumer", sources=("host",))
            ready, times = [], []
            with rec:
                for i in range(steps):
                    t0 = time.perf_counter()
                    with rec.step(i):
                        with rec.span("queue_get"):
                            while len(ready) < min_ready:
                                ready.append(q.get())
                            while True:  # take what else is already waiting
                                try:
                                    ready.append(q.get_nowait())
                                except queue_mod.Empty:
                                    break
                        batch = ready.pop(0)
                        with rec.span("forward"):
                            time.sleep(0.002)
                            float(batch.mean())
                    times.append(time.perf_counter() - t0)
                later = sorted(times[len(times) // 4:])
                print(f"consumer {rank}: median step {later[len(later) // 2] * 1e3:.3f} ms", flush=True)
                done.set()
                rec.snapshot("workload_boundary")
    ''',
    "pipeline.py": '''
        """Start the producers and consumers and wait for the consumers' steps."""
        import argparse
        import multiprocessing as mp

        import workers


        def main():
            p = argparse.ArgumentParser()
            p.add_argument("--producers", type=int, default=1)
            p.add_argument("--consumers", type=int, default=2)
            p.add_argument("--min-ready", type=int, default=1)
            p.add_argument("--steps", type=int, default=30)
            args = p.parse_args()
            ctx = mp.get_context()
            q, stop = ctx.Queue(), ctx.Event()
            world = args.consumers + args.producers
            dones = [ctx.Event() for _ in range(args.consumers)]
            # Consumers are ranks 0..C-1, producers after them.
            procs = [ctx.Process(target=workers.consumer, args=(r, world, q, args.steps, args.min_ready, dones[r]))
                     for r in range(args.consumers)]
            procs += [ctx.Process(target=workers.producer, args=(args.consumers + k, world, q, stop))
                      for k in range(args.producers)]
            for proc in procs:
                proc.start()
            for d in dones:
                d.wait()
            stop.set()
            for proc in procs:
                proc.join()
            raise SystemExit(max(proc.exitcode for proc in procs))


        if __name__ == "__main__":
            main()
    ''',
    ".gitignore": "incidents/\n",
}
MODULES = ("hidden.py", "workers.py", "pipeline.py")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True, text=True)


def make_project(root: Path) -> Path:
    repo = root / "pc"
    repo.mkdir(parents=True)
    for rel, text in FILES.items():
        (repo / rel).write_text(textwrap.dedent(text).lstrip())
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "producer/consumer job")
    return repo
