"""A trainer that, on some steps, applies a hand-written per-element update in a Python loop:
3,000 tiny elementwise operations, each its own kernel launch."""
import argparse
import time

import torch
import torch.nn as nn


def steps_of(spec):
    out = set()
    for part in filter(None, spec.split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--ops", type=int, default=3000)
    p.add_argument("--loop-at", default="40-45", help="steps that run the Python loop (e.g. 40-45)")
    args = p.parse_args()
    loop_at = steps_of(args.loop_at)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(args.dim, args.dim), nn.GELU())]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8192, args.dim, device=dev)
    ema = torch.zeros(256, device=dev)
    t0 = time.time()
    for step in range(args.steps):
        if step in loop_at:
            for _ in range(args.ops):  # one small kernel per iteration
                ema.mul_(0.999)
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 or step in loop_at:
            print(f"step {step} ({time.time() - t0:.2f}s){' looped' if step in loop_at else ''}", flush=True)


if __name__ == "__main__":
    main()
