"""A deep MLP trainer that, on some steps, logs every layer's activation norm with `.item()`
(the debugging pattern that makes the host wait for the GPU after each layer)."""
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


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--tokens", type=int, default=6144)
    p.add_argument("--log-layers-at", default="40-45", help="steps that log per-layer norms (e.g. 40-45)")
    args = p.parse_args()
    log_at = steps_of(args.log_layers_at)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    blocks = nn.ModuleList(Block(args.dim) for _ in range(args.layers)).to(dev)
    opt = torch.optim.AdamW(blocks.parameters(), lr=1e-4)
    x = torch.randn(args.tokens, args.dim, device=dev)
    t0 = time.time()
    for step in range(args.steps):
        stats = {}
        with torch.autocast(dev, dtype=torch.bfloat16):
            h = x
            for i, blk in enumerate(blocks):
                h = blk(h)
                if step in log_at:
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    stats[f"layer{i}"] = h.float().norm().item()
            loss = h.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 or stats:
            print(f"step {step} ({time.time() - t0:.2f}s){' norms logged' if stats else ''}", flush=True)


if __name__ == "__main__":
    main()
