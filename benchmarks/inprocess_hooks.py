"""What the zero-change capture's hooks cost a CPU training loop (capture/inprocess/).

    python benchmarks/inprocess_hooks.py [--windows 40] [--steps 25] [--smoke]

One process, a small CPU training step (DataLoader with no workers over in-memory tensors, an
MLP forward and backward, SGD, a few thousand short-lived objects with reference cycles so the
GC collects): first W windows of K steps with no hook installed (the reference), then the
hooks installed (gc_hooks, torch_hooks: optimizer, DataLoader, root-module forward, backward,
checkpoint, c10d, record_function) and W windows alternating, in a seeded random order within
each pair, recording on and recording paused (the hooks then only ask whether to record).
First, per event: what one hook adds (a span wrapper around a no-op; a GC collection with
the callback), in shuffled rounds. Printed: each mode's median window time per step, the ratio of each to the reference, and
the paired on/paused ratio's median with its 95% interval over pairs (Hodges-Lehmann, the
trials' own statistics: workflow_lib.compare.stats).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def per_call(rounds: int, n: int) -> None:
    """Added ns per hook event, in shuffled rounds of n events: a span wrapper (`_timed`, the
    shape of the backward, checkpoint and c10d hooks and of DataLoader.__next__'s) around a no-op
    against the bare no-op, and a young GC collection with the gc callback against without it."""
    import gc
    import random
    import statistics

    from workflow_lib.capture.inprocess import adopt, gc_hooks, torch_hooks
    from workflow_lib.capture.inprocess.session import Session

    sess = Session("bench-per-call", eager=True)
    adopt.current = sess
    rec = sess.recorder((), {"sources": ("host",)})

    def noop():
        return None

    wrapped = torch_hooks._timed(sess, "bench.noop", noop)
    before = list(gc.callbacks)
    gc_hooks.install(sess)
    ours = [c for c in gc.callbacks if c not in before]
    gc.callbacks[:] = before

    def calls(fn):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t0) / n

    def collections(with_cb):
        gc.callbacks[:] = before + (ours if with_cb else [])
        t0 = time.perf_counter_ns()
        for _ in range(n // 10):
            gc.collect(0)
        out = (time.perf_counter_ns() - t0) / (n // 10)
        gc.callbacks[:] = before
        return out

    rng = random.Random(7)
    span_add, gc_add = [], []
    for _ in range(rounds):
        got = {}
        for what in rng.sample(["bare", "wrapped", "gc", "gc+cb"], 4):
            got[what] = {"bare": lambda: calls(noop), "wrapped": lambda: calls(wrapped),
                         "gc": lambda: collections(False), "gc+cb": lambda: collections(True)}[what]()
        span_add.append(got["wrapped"] - got["bare"])
        gc_add.append(got["gc+cb"] - got["gc"])
    rec._session = None
    rec.stop()
    adopt.current = None
    med = statistics.median
    print(f"per call, median over {rounds} rounds of {n}: span wrapper +{med(span_add):.0f} ns/event "
          f"(quartiles {statistics.quantiles(span_add, n=4)[0]:.0f}..{statistics.quantiles(span_add, n=4)[2]:.0f}); "
          f"gc callback +{med(gc_add):.0f} ns/collection "
          f"(quartiles {statistics.quantiles(gc_add, n=4)[0]:.0f}..{statistics.quantiles(gc_add, n=4)[2]:.0f})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--windows", type=int, default=40)
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--smoke", action="store_true", help="seconds: 4 windows of 5 steps")
    p.add_argument("--sources", default="host",
                   help="the recorder's sources, comma-separated (default host: the hooks alone; "
                        "host,nvml,sched adds the sampler threads)")
    p.add_argument("--per-call-only", action="store_true", help="only the per-event costs")
    args = p.parse_args(argv)
    if args.smoke:
        args.windows, args.steps = 4, 5
    per_call(5 if args.smoke else 41, 2_000 if args.smoke else 20_000)
    if args.per_call_only:
        return 0
    try:
        import torch
    except ImportError:
        print("inprocess_hooks: torch not installed; nothing to measure")
        return 0
    import numpy as np
    from torch.utils.data import DataLoader, TensorDataset

    from workflow_lib.capture.inprocess import adopt, gc_hooks, torch_hooks
    from workflow_lib.capture.inprocess.session import Session
    from workflow_lib.compare import stats

    os.environ.setdefault("STALLCASE_RECORDER_MODE", "nocupti")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ds = TensorDataset(torch.randn(4096, 64), torch.randn(4096, 1))

    def build():
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
        return model, torch.optim.SGD(model.parameters(), lr=0.01)

    class Node:
        def __init__(self):
            self.me = self

    def window(model, opt, it_holder):
        t0 = time.perf_counter_ns()
        for _ in range(args.steps):
            try:
                x, y = next(it_holder[0])
            except StopIteration:
                it_holder[0] = iter(DataLoader(ds, batch_size=32))
                x, y = next(it_holder[0])
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            junk = [Node() for _ in range(2000)]  # cycles: collected by the automatic GC
            del junk
        return (time.perf_counter_ns() - t0) / args.steps

    model, opt = build()
    it = [iter(DataLoader(ds, batch_size=32))]
    for _ in range(3):
        window(model, opt, it)  # warm-up
    bare = [window(model, opt, it) for _ in range(args.windows)]

    sess = Session("bench-inprocess", eager=True)
    adopt.current = sess
    sess.installed += gc_hooks.install(sess)
    sess.roots = torch_hooks.RootModules(sess)
    sess.installed += torch_hooks.install(sess, torch)
    rec = sess.recorder((), {"sources": tuple(args.sources.split(","))})
    model, opt = build()  # built under the hooks: its root module gets forward spans
    it = [iter(DataLoader(ds, batch_size=32))]
    for _ in range(3):
        window(model, opt, it)
    rng = random.Random(20261203)
    on, paused = [], []
    for _ in range(args.windows):
        for mode in rng.sample(["on", "paused"], 2):
            (rec.resume if mode == "on" else rec.pause)()
            (on if mode == "on" else paused).append(window(model, opt, it))
    rec.resume()
    spans = rec.host.spans.written if rec.host is not None else 0
    rec._session = None
    rec.stop()
    adopt.current = None

    med = statistics.median
    print(f"sources {args.sources}; steps per window {args.steps}, windows {args.windows}, spans recorded {spans}")
    print(f"no hooks          {med(bare) / 1e3:9.1f} us/step  (reference)")
    print(f"hooks, recording  {med(on) / 1e3:9.1f} us/step  ratio {med(on) / med(bare):.4f}")
    print(f"hooks, paused     {med(paused) / 1e3:9.1f} us/step  ratio {med(paused) / med(bare):.4f}")
    logs = np.log(np.asarray(on) / np.asarray(paused))
    est, lo, hi = stats.hodges_lehmann(logs, 0.95)
    if np.isfinite(lo):
        print(f"recording on / paused, paired over {len(logs)} pairs: {np.exp(est):.4f} [{np.exp(lo):.4f}, {np.exp(hi):.4f}] (95%)")
    else:
        print(f"recording on / paused, paired over {len(logs)} pairs: {np.exp(est):.4f} (too few pairs for an interval)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
