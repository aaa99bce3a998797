"""A user's own three-module training program, in its own git repository: the model in one
module, a batch loader with worker threads in another, and a train.py with the README's
loop exactly. Loading an item is slow-ish I/O (it sleeps, releasing the GIL, as reading
and decoding a sample does), so more loader workers make each iteration faster while the
model's own time stays the same: the fix the README's own-workload commands must find.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

FILES = {
    "model.py": '''
        """A small MLP in NumPy."""
        import numpy as np


        class MLP:
            def __init__(self, width=256, depth=3, seed=0):
                rng = np.random.default_rng(seed)
                dims = [64] + [width] * depth
                self.weights = [rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a) for a, b in zip(dims, dims[1:])]

            def forward(self, x):
                for w in self.weights:
                    x = np.tanh(x @ w)
                return float(x.mean())
    ''',
    "data.py": '''
        """Batches of samples, loaded by worker threads (like a DataLoader's num_workers)."""
        import collections
        import time
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np


        def load_sample(index):
            time.sleep(0.004)  # reading and decoding one sample from disk
            return np.random.default_rng(index).standard_normal(64).astype(np.float32)


        class Loader:
            def __init__(self, batches, batch_size=4, workers=1, prefetch=2):
                self.batches, self.batch_size, self.workers, self.prefetch = batches, batch_size, workers, prefetch

            def __iter__(self):
                with ThreadPoolExecutor(max_workers=self.workers) as pool:
                    pending = collections.deque()
                    submit = lambda b: [pool.submit(load_sample, b * self.batch_size + k) for k in range(self.batch_size)]
                    for b in range(min(self.prefetch, self.batches)):
                        pending.append(submit(b))
                    for b in range(self.batches):
                        futures = pending.popleft()
                        if b + self.prefetch < self.batches:
                            pending.append(submit(b + self.prefetch))
                        yield np.stack([f.result() for f in futures])
    ''',
    "train.py": '''
        """Train the model on the loader's batches."""
        import argparse
        import time

        from workflow_lib.capture import FlightRecorder

        from data import Loader
        from model import MLP


        def main():
            p = argparse.ArgumentParser()
            p.add_argument("--steps", type=int, default=30)
            p.add_argument("--workers", type=int, default=1)
            args = p.parse_args()
            loader = Loader(args.steps, batch_size=4, workers=args.workers)
            model = MLP()
            t0 = time.perf_counter()
            rec = FlightRecorder(incident_id="slow-step-0412")
            with rec:
                for i, batch in enumerate(loader):
                    with rec.step(i):
                        with rec.span("forward"):
                            model.forward(batch)
                print(f"{args.steps} steps in {time.perf_counter() - t0:.4f} s")
                rec.snapshot("workload_boundary")


        if __name__ == "__main__":
            main()
    ''',
    ".gitignore": "incidents/\n",
}
MODULES = ("data.py", "model.py", "train.py")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True, text=True)


def make_project(root: Path) -> Path:
    repo = root / "proj"
    repo.mkdir(parents=True)
    for rel, text in FILES.items():
        (repo / rel).write_text(textwrap.dedent(text).lstrip())
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "toy trainer")
    return repo
