"""Train a wide MLP and save a checkpoint (model and optimizer state) every N steps."""
import argparse
import os
import tempfile
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=160)
    p.add_argument("--save-every", type=int, default=40)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "ckpt"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    w = args.width
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(w, w), nn.ReLU())]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        x = torch.randn(512, w, device=dev)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % args.save_every == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
                       os.path.join(args.out, "last.pt"))
            print(f"step {step}: saved ({time.time() - t0:.1f}s)", flush=True)


if __name__ == "__main__":
    main()
