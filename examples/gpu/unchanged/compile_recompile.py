"""Train a small GPT-style model with torch.compile; the data pipeline switches to longer
sequences part-way (curriculum), so the compiled model recompiles for the new length."""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=8192, d=512, heads=8, layers=4, max_len=1024):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=90)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lengths", default="256,384", help="sequence length per phase")
    args = p.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    cmodel = torch.compile(model, dynamic=False)
    lengths = [int(x) for x in args.lengths.split(",")]
    per_phase = math.ceil(args.steps / len(lengths))
    t0 = time.time()
    for step in range(args.steps):
        seq = lengths[min(step // per_phase, len(lengths) - 1)]
        idx = torch.randint(0, 8192, (args.batch, seq + 1), device=dev)
        with torch.autocast(dev, dtype=torch.bfloat16):
            logits = cmodel(idx[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 30 == 0:
            print(f"step {step} seq {seq} loss {loss.item():.3f} ({time.time() - t0:.1f}s)", flush=True)


if __name__ == "__main__":
    main()
