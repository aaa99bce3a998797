"""A program nobody here wrote for stallcase, in the shape of PyTorch's `word_language_model`
example (github.com/pytorch/examples, word_language_model/main.py, BSD-3-Clause): an LSTM
language model trained with truncated back-propagation, the same command line (`--batch_size`,
`--bptt`, `--nhid`, `--emsize`, `--nlayers`, `--lr`, `--clip`, `--log-interval`) and the same
progress line (`| epoch   1 |    20/  71 batches | lr 20.00 | ms/batch 12.34 | loss  6.21 | ppl
  497.38`). It is written here, not copied: the example needs the 12 MB WikiText-2 corpus, so
this one trains on a small synthetic Zipf corpus it writes itself, and stops after
`--max-batches`. It knows nothing of stallcase (no recorder); it is recorded from outside
with `stallcase record --step-pattern`.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

MAIN = '''
    # coding: utf-8
    """Word-level LSTM language model (the shape of pytorch/examples word_language_model)."""
    import argparse
    import math
    import time

    import torch
    import torch.nn as nn

    parser = argparse.ArgumentParser(description="LSTM language model on a small corpus")
    parser.add_argument("--data", type=str, default="./corpus.txt")
    parser.add_argument("--emsize", type=int, default=64)
    parser.add_argument("--nhid", type=int, default=128)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=20)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--batch_size", type=int, default=20, metavar="N")
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--log-interval", type=int, default=10, metavar="N")
    parser.add_argument("--max-batches", type=int, default=60)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    words = open(args.data).read().split()
    vocab = {w: i for i, w in enumerate(sorted(set(words)))}
    ids = torch.tensor([vocab[w] for w in words], dtype=torch.long)


    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.nhid, self.nlayers = nhid, nlayers

        def forward(self, x, hidden):
            out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
            return self.decoder(self.drop(out)).view(-1, self.decoder.out_features), hidden

        def init_hidden(self, bsz):
            w = next(self.parameters())
            return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


    train_data = batchify(ids, args.batch_size)
    ntokens = len(vocab)
    model = RNNModel(ntokens, args.emsize, args.nhid, args.nlayers, args.dropout)
    criterion = nn.CrossEntropyLoss()
    lr = args.lr
    nbatches = (train_data.size(0) - 1) // args.bptt


    def get_batch(source, i):
        seq_len = min(args.bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


    model.train()
    total_loss, done, epoch = 0.0, 0, 1
    hidden = model.init_hidden(args.batch_size)
    start_time = time.time()
    while done < args.max_batches:
        for batch, i in enumerate(range(0, nbatches * args.bptt, args.bptt)):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            hidden = tuple(h.detach() for h in hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            done += 1
            if done % args.log_interval == 0:
                cur_loss = total_loss / args.log_interval
                elapsed = time.time() - start_time
                print("| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "
                      "loss {:5.2f} | ppl {:8.2f}".format(epoch, batch + 1, nbatches, lr,
                                                          elapsed * 1000 / args.log_interval, cur_loss,
                                                          math.exp(cur_loss)), flush=True)
                total_loss = 0.0
                start_time = time.time()
            if done >= args.max_batches:
                break
        epoch += 1
'''

# The progress line's time per batch (the example prints the mean over the log interval).
STEP_PATTERN = r"\| ms/batch +(?P<ms>[0-9.]+) \|"


def corpus(n_words: int = 60_000, vocab: int = 400, seed: int = 7) -> str:
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = rng.zipf(1.3, size=n_words) % vocab
    return " ".join(f"w{r}" for r in ranks.tolist())


def make_project(root: Path) -> Path:
    """The program in its own git repository (main.py and corpus.txt, both tracked)."""
    repo = root / "wlm"
    repo.mkdir()
    (repo / "main.py").write_text(textwrap.dedent(MAIN).lstrip())
    (repo / "corpus.txt").write_text(corpus())
    git = ["git", "-c", "user.email=u@example.com", "-c", "user.name=u"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "lm"], cwd=repo, check=True)
    return repo


def ms_per_batch(out: str, skip: int) -> list[float]:
    """The progress lines' ms/batch after the first `skip` lines (the pipeline's skip_steps)."""
    import re

    return [float(m.group("ms")) for m in re.finditer(STEP_PATTERN, out)][skip:]


def _lines_less_wait(argv: list[str], cwd: Path, env: dict) -> list[float]:
    """The run's ms/batch lines, each less the share of its time the program waited for a CPU: the
    kernel's run-queue delay of the program's threads (/proc/<pid>/task/*/schedstat, 2nd field) read
    when each line arrives, over the time since the previous line. Written here, not imported from
    the pipeline (trials/line_clock.py), so the truth does not share the code it checks."""
    import os
    import re
    import time

    def waited(pid: int) -> int:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:  # a thread may end between the listing and the read
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    total += int(fh.read().split()[1])
            except FileNotFoundError:
                continue
        return total

    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True)
    out, prev = [], (time.monotonic_ns(), 0)
    for line in proc.stdout:
        now = (time.monotonic_ns(), waited(proc.pid))
        m = re.search(STEP_PATTERN, line)
        if m:
            out.append(float(m.group("ms")) * (1 - (now[1] - prev[1]) / (now[0] - prev[0])))
            prev = now
    assert proc.wait(timeout=300) == 0, argv
    return out


def per_token_truth(repo: Path, args: list[str], batch_sizes: tuple[int, int], pairs: int, skip: int, env: dict,
                    statistic: str = "median", less_wait: bool = False) -> dict:
    """The program's own time per token at two batch sizes, measured outside stallcase: `pairs`
    pairs of runs, the two sizes alternating (order flipped every other pair, so a trend in the
    machine's load falls on both), each run's `statistic` (median or min, as the plan's) of its ms/batch
    lines after `skip` (with `less_wait`, each line less the program's wait for a CPU meanwhile),
    divided by its tokens per batch (batch size x bptt). Returns each pair's ratio, their
    median (second size over first), and the share of the machine other processes used
    meanwhile (trials/host_load.py, as the pipeline's runs note it)."""
    import statistics
    import sys

    from workflow_lib.trials import host_load

    bptt = int(args[args.index("--bptt") + 1])
    base = [a for i, a in enumerate(args) if a != "--batch_size" and (i == 0 or args[i - 1] != "--batch_size")]
    ratios, per_token = [], {bs: [] for bs in batch_sizes}
    before = host_load.sample()
    for k in range(pairs):
        got = {}
        for bs in (batch_sizes if k % 2 == 0 else batch_sizes[::-1]):
            argv = [sys.executable, "main.py", "--batch_size", str(bs), *base]
            if less_wait:
                lines = _lines_less_wait(argv, repo, env)[skip:]
            else:
                lines = ms_per_batch(subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=300,
                                                    check=True).stdout, skip)
            got[bs] = {"median": statistics.median, "min": min}[statistic](lines) / (bs * bptt)
            per_token[bs].append(got[bs])
        ratios.append(got[batch_sizes[1]] / got[batch_sizes[0]])
    return {"ratios": ratios, "ratio": statistics.median(ratios), "ms_per_token": per_token,
            "other_share": host_load.other_share(before, host_load.sample())}
