"""A trainer that, on some steps, uploads a large host buffer (features kept in ordinary,
pageable host memory) to the GPU before the step: a synchronous copy on the compute stream."""
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
    p.add_argument("--copy-mb", type=int, default=400)
    p.add_argument("--copy-at", default="40-45", help="steps that upload the host buffer (e.g. 40-45)")
    args = p.parse_args()
    copy_at = steps_of(args.copy_at)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(args.dim, args.dim), nn.GELU())]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    host_features = torch.randn(args.copy_mb * (1 << 20) // 4)  # pageable: not pin_memory()
    x = torch.randn(8192, args.dim, device=dev)
    t0 = time.time()
    for step in range(args.steps):
        if step in copy_at:
            feats = host_features.to(dev)  # blocking host-to-device copy from pageable memory
            x = x + feats[: x.numel()].view_as(x) * 1e-6
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        x = x.detach()
        if step % 10 == 0 or step in copy_at:
            print(f"step {step} ({time.time() - t0:.2f}s){' uploaded' if step in copy_at else ''}", flush=True)


if __name__ == "__main__":
    main()
