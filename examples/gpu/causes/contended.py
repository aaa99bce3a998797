"""A plain MLP trainer that prints each step's end time (its launcher, capture_all.sh or
capture_contended.sh, starts another GPU job during some steps: the program itself does nothing
different). With --log-loss it prints the loss too, as most training loops do, so the host
waits for each step's GPU work and a slower GPU shows in the step's time."""
import argparse
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--log-loss", action="store_true",
                   help="print each step's loss (loss.item(): the host waits for the step's GPU work)")
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(args.dim, args.dim), nn.GELU())]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8192, args.dim, device=dev)
    for step in range(args.steps):
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_txt = f" loss {loss.item():.5f}" if args.log_loss else ""
        print(f"step {step}{loss_txt} end {time.time():.6f}", flush=True)


if __name__ == "__main__":
    main()
