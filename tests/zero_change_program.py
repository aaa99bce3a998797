"""A user's own training program, written as users write them and with no stallcase import: a
small package (`trainer/`: data, model, checkpointing, the loop) and `prog.py`, in its own git
repository. A real DataLoader with worker processes (each item costs `--item-ms` of decoding),
an MLP, SGD, Python objects with reference cycles made every step (so automatic GC collects
many of them), `torch.save` every `--save-every` steps. Under torchrun (gloo) the ranks average
their gradients with all_reduce and rank 0 saves."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

FILES = {
    "trainer/__init__.py": '''
        """A small trainer."""
    ''',
    "trainer/data.py": '''
        """Synthetic samples that take time to decode."""
        import time

        import torch
        from torch.utils.data import DataLoader, Dataset


        class Samples(Dataset):
            def __init__(self, n, width, item_ms):
                self.n, self.width, self.item_ms = n, width, item_ms

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                if self.item_ms > 0:
                    time.sleep(self.item_ms / 1e3)  # decoding and augmenting one sample
                g = torch.Generator().manual_seed(i)
                x = torch.randn(self.width, generator=g)
                return x, x.sum().unsqueeze(0)


        def loader(n, width, batch, workers, item_ms):
            return DataLoader(Samples(n, width, item_ms), batch_size=batch, num_workers=workers,
                              persistent_workers=workers > 0)
    ''',
    "trainer/model.py": '''
        """A small MLP."""
        import torch


        def make_model(width):
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(width, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ''',
    "trainer/ckpt.py": '''
        """Checkpoints: the model and optimizer state."""
        import os

        import torch


        def save(model, opt, step, out_dir):
            os.makedirs(out_dir, exist_ok=True)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
                       os.path.join(out_dir, "last.pt"))
    ''',
    "trainer/loop.py": '''
        """The training loop."""
        import os

        import torch
        import torch.distributed as dist

        from . import ckpt
        from .data import loader
        from .model import make_model


        class Record:
            """Per-sample bookkeeping with a back-reference (a cycle only the GC frees)."""

            def __init__(self, i):
                self.i = i
                self.meta = {"owner": self, "tags": [i, str(i)]}


        def train(args):
            distributed = "RANK" in os.environ
            if distributed:
                dist.init_process_group("gloo")
            rank = dist.get_rank() if distributed else 0
            torch.set_num_threads(1)
            model = make_model(args.width)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            history = []
            for step, (x, y) in enumerate(loader(args.batch * args.steps, args.width, args.batch, args.workers, args.item_ms)):
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                if distributed:
                    for p in model.parameters():
                        dist.all_reduce(p.grad)
                        p.grad /= dist.get_world_size()
                opt.step()
                history.append([Record(k) for k in range(args.records)])
                if len(history) > 4:
                    history.pop(0)
                if (step + 1) % args.save_every == 0 and rank == 0:
                    ckpt.save(model, opt, step, args.out)
            if distributed:
                dist.destroy_process_group()
            return step + 1
    ''',
    "prog.py": '''
        """Train the MLP."""
        import argparse

        from trainer.loop import train


        def main():
            p = argparse.ArgumentParser()
            p.add_argument("--steps", type=int, default=24)
            p.add_argument("--batch", type=int, default=8)
            p.add_argument("--width", type=int, default=32)
            p.add_argument("--workers", type=int, default=1)
            p.add_argument("--item-ms", type=float, default=3.0)
            p.add_argument("--records", type=int, default=3000)
            p.add_argument("--save-every", type=int, default=6)
            p.add_argument("--out", default="checkpoints")
            print(f"trained {train(p.parse_args())} steps", flush=True)


        if __name__ == "__main__":
            main()
    ''',
}


def make_project(root: Path) -> Path:
    repo = root / "trainer-project"
    for rel, text in FILES.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    (repo / ".gitignore").write_text("checkpoints/\nincidents/\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "trainer"]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True, text=True)
    return repo
