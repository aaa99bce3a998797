"""Image-classifier style training whose samples are decoded on the CPU by two DataLoader
workers: decoding is slower than the GPU's step."""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Decoded(Dataset):
    def __init__(self, n, decode_ms):
        self.n, self.decode_ms = n, decode_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t = time.perf_counter()
        rng = np.random.default_rng(i)
        img = rng.random((3, 64, 64), dtype=np.float32)
        while (time.perf_counter() - t) * 1e3 < self.decode_ms:  # JPEG decode + augment
            img = np.flip(img, axis=2).copy()
        return torch.from_numpy(img), i % 100


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--decode-ms", type=float, default=1.0)
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 100)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(Decoded(args.steps * args.batch, args.decode_ms), batch_size=args.batch,
                        num_workers=args.workers, pin_memory=True)
    t0 = time.time()
    for step, (x, y) in enumerate(loader):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} ({time.time() - t0:.1f}s)", flush=True)


if __name__ == "__main__":
    main()
