"""A transformer-encoder training loop that reports its own steady-state time per step."""
import argparse
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=50)
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    model = nn.TransformerEncoder(layer, 4).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 512, 512, device=dev)
    for step in range(args.steps):
        if step == args.warmup:
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"steady_ms_per_step {(time.perf_counter() - t0) * 1e3 / (args.steps - args.warmup):.4f}", flush=True)


if __name__ == "__main__":
    main()
