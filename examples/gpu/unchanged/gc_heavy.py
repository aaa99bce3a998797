"""A trainer that keeps a large in-memory sample index (millions of small Python objects) and,
like many large trainers, turns automatic GC off and collects on a schedule."""
import argparse
import gc
import time

import torch
import torch.nn as nn


def build_index(n):
    # Per-sample metadata kept for the whole run: a dict per sample (path, length, tags).
    return [{"id": i, "path": f"shard-{i % 512}/sample-{i}.bin", "len": 128 + i % 384, "tags": [i % 7, i % 11]}
            for i in range(n)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=240)
    p.add_argument("--index", type=int, default=1_500_000)
    p.add_argument("--gc-every", type=int, default=50)
    args = p.parse_args()
    gc.disable()  # collect on our schedule only (torchtitan, OLMo and NeMo do this)
    index = build_index(args.index)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    history = []
    t0 = time.time()
    for step in range(args.steps):
        meta = [index[(step * 64 + j) % len(index)] for j in range(64)]
        x = torch.randn(256, 1024, device=dev)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        history.append({"step": step, "samples": meta})  # bookkeeping that grows every step
        if step % args.gc_every == 0 and step > 0:
            gc.collect()
        if step % 60 == 0:
            print(f"step {step} loss {loss.item():.4f} ({time.time() - t0:.1f}s)", flush=True)


if __name__ == "__main__":
    main()
