"""A user's own data-parallel job under torchrun, in its own git repository: a model module,
an augmentation module and train.py, gloo on CPU, an all-reduce of the gradients each step.
One rank (`--slow-rank`) does extra host-side augmentation per step (`--extra-ms`), so the
other ranks wait for it inside the all-reduce: the job runs at that rank's pace.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

FILES = {
    "model.py": '''
        """A small MLP."""
        import torch


        def make_model(width=128):
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))
    ''',
    "augment.py": '''
        """Host-side augmentation of a batch (slow on purpose on one rank)."""
        import time


        def augment(batch, extra_ms):
            if extra_ms > 0:
                time.sleep(extra_ms / 1e3)  # decoding and augmenting on the training thread
            return batch
    ''',
    "train.py": '''
        """Data-parallel training: gloo all-reduce of the gradients each step."""
        import argparse

        import torch
        import torch.distributed as dist

        from workflow_lib.capture import FlightRecorder

        from augment import augment
        from model import make_model


        def main():
            p = argparse.ArgumentParser()
            p.add_argument("--steps", type=int, default=40)
            p.add_argument("--slow-rank", type=int, default=1)
            p.add_argument("--extra-ms", type=float, default=40.0)
            args = p.parse_args()
            dist.init_process_group("gloo")
            rank, world = dist.get_rank(), dist.get_world_size()
            torch.set_num_threads(1)
            model = make_model()
            rec = FlightRecorder(incident_id="ddp-0412")
            with rec:
                for i in range(args.steps):
                    with rec.step(i):
                        with rec.span("augment"):
                            batch = augment(torch.randn(32, 128), args.extra_ms if rank == args.slow_rank else 0)
                        with rec.span("forward"):
                            loss = model(batch).pow(2).mean()
                            loss.backward()
                        with rec.span("all_reduce"):
                            for prm in model.parameters():
                                dist.all_reduce(prm.grad)
                                prm.grad /= world
                        with torch.no_grad():  # plain SGD: torch.optim's first use imports torch._dynamo (~1.8 s CPU a rank)
                            for prm in model.parameters():
                                prm -= 0.01 * prm.grad
                                prm.grad = None
                rec.snapshot("workload_boundary")
            dist.destroy_process_group()


        if __name__ == "__main__":
            main()
    ''',
    ".gitignore": "incidents/\n",
}
MODULES = ("model.py", "augment.py", "train.py")


def make_project(root: Path) -> Path:
    repo = root / "ddp"
    repo.mkdir(parents=True)
    for rel, text in FILES.items():
        (repo / rel).write_text(textwrap.dedent(text).lstrip())
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "ddp job"]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True, text=True)
    return repo
