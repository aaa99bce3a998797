"""A training loop that logs the running loss and accuracy every step with .item()."""
import argparse
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    running, correct, seen = 0.0, 0, 0
    t0 = time.time()
    for step in range(args.steps):
        x = torch.randn(128, 512, device=dev)
        y = torch.randint(0, 10, (128,), device=dev)
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        running += loss.item()  # the GPU must finish before the next step is queued
        correct += (out.argmax(1) == y).sum().item()
        seen += y.numel()
        if step % 100 == 0:
            print(f"step {step} loss {running / (step + 1):.3f} acc {correct / seen:.3f} ({time.time() - t0:.1f}s)", flush=True)


if __name__ == "__main__":
    main()
