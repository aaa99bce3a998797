"""Another user's GPU job: waits for a start file, then runs bf16 matmuls for --seconds (or until
a stop file exists) and prints when it ran (wall clock), so the launcher can tell which of the trainer's steps shared the GPU."""
import argparse
import os
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--go", required=True, help="start when this file exists")
    p.add_argument("--seconds", type=float, default=0.4, help="run this long (with --stop: at most this long)")
    p.add_argument("--stop", default=None, help="stop when this file exists (the launcher's: after a trainer's step)")
    p.add_argument("--n", type=int, default=8192)
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16)
    (a @ b).sum().item()  # warm: the cuBLAS handle and kernels are ready before the start
    deadline = time.time() + 600
    while not os.path.exists(args.go) and time.time() < deadline:
        time.sleep(0.001)
    t0 = time.time()
    while time.time() - t0 < args.seconds and not (args.stop and os.path.exists(args.stop)):
        for _ in range(4):
            a @ b
        if dev == "cuda":
            torch.cuda.synchronize()
    print(f"hog start {t0:.6f} end {time.time():.6f}", flush=True)


if __name__ == "__main__":
    main()
