"""The loops whose recorder overhead benchmarks/recorder_overhead.py measures through the trials stage.

    python benchmarks/overhead_workload.py --loop transformer|launch_bound \
        --recorder tiered|cupti|nocupti|off|torch_profiler [--steps 200] \
        [--incident ID --incidents-dir DIR] [--slow-step N]

The loop people write: a model, a DataLoader, an optimizer, `with rec.step(i):` around
each iteration and a span or two inside. `--recorder` is the arm's variable (a trial
candidate changes it with `set_args`):
  tiered          the recorder's default: spans, steps, NVML, sched; CUPTI kernel activity
                  armed by the latency trigger for the next --gpu-window steps;
  cupti           the same with CUPTI always on;
  nocupti         the always-on layer only;
  off             the recorder off (STALLCASE_STEPS_OUT still written: the trial metric);
  torch_profiler  torch.profiler (CPU + CUDA activity) around the loop; the recorder keeps
                  steps only (host source: no samplers, no CUPTI, which torch.profiler owns).
Loops:
  transformer     4 encoder layers, d=1024, 16 heads, batch 8 x 512 tokens, bf16 autocast,
                  fused AdamW, batches from a DataLoader (2 workers, pinned memory) as in
                  shared/notes/gpu.md; without CUDA a tiny version on the CPU;
  launch_bound    300 tiny kernels per step then a sync; without torch a NumPy twin.
With --incident (a capture, not a trial run: STALLCASE_TRIAL_ARM unset) the run snapshots
at the end (the incident the trials are planned from); --slow-step sleeps 50 ms in that
step, so the latency trigger fires and arms CUPTI (the triggered window the incident shows).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from workflow_lib.capture import FlightRecorder, LatencyTrigger

MODES = ("tiered", "cupti", "nocupti", "off", "torch_profiler")


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def transformer(torch, cuda: bool, rec):
    """(step(i), sync) of the small transformer trained from a DataLoader."""
    nn = torch.nn
    dev = torch.device("cuda" if cuda else "cpu")
    d, layers, heads, batch, seq = (1024, 4, 16, 8, 512) if cuda else (64, 2, 4, 2, 32)
    vocab = 8192 if cuda else 256
    torch.manual_seed(0)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 20

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return torch.randint(0, vocab, (seq + 1,), generator=g)

    emb = nn.Embedding(vocab, d)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0), layers)
    head = nn.Linear(d, vocab)
    model = nn.Sequential(emb, enc, head).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    loader = torch.utils.data.DataLoader(Tokens(), batch_size=batch, num_workers=2, pin_memory=cuda,
                                         persistent_workers=True, prefetch_factor=4)
    it = iter(loader)
    span = rec.span
    loss_fn = nn.CrossEntropyLoss()

    def step(i):
        with span("data"):
            x = next(it).to(dev, non_blocking=True)
        with span("forward"):
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                logits = model(x[:, :-1])
                loss = loss_fn(logits.reshape(-1, vocab).float(), x[:, 1:].reshape(-1))
        with span("backward"):
            loss.backward()
        with span("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    return step, (torch.cuda.synchronize if cuda else (lambda: None))


def launch_bound(torch, cuda: bool, rec):
    span = rec.span
    if torch is None:
        import numpy as np

        small = np.zeros(256, np.float32)

        def step_np(i):
            with span("launch"):
                for _ in range(300):
                    small += 1.0

        return step_np, (lambda: None)
    small = torch.zeros(256, device="cuda" if cuda else "cpu")

    def step(i):
        with span("launch"):
            for _ in range(300):
                small.add_(1.0)

    return step, (torch.cuda.synchronize if cuda else (lambda: None))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loop", choices=("transformer", "launch_bound"), default=None, help="required but with --smoke")
    ap.add_argument("--recorder", choices=MODES, default="tiered")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sync-every", type=int, default=1, help="steps between device syncs (0: never)")
    ap.add_argument("--gpu-window", type=int, default=16, help="steps CUPTI stays armed after a trigger")
    ap.add_argument("--slow-step", type=int, default=-1)
    ap.add_argument("--incident", default=None)
    ap.add_argument("--incidents-dir", default="incidents")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): a few launch-bound steps "
                    "with a fired window, into a temp dir; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        import tempfile

        args.loop, args.steps, args.slow_step = args.loop or "launch_bound", 30, 25
        args.incident, args.incidents_dir = "smoke", tempfile.mkdtemp(prefix="overhead-workload-")
    if args.loop is None:
        ap.error("--loop is required")
    torch = _torch()
    cuda = bool(torch is not None and torch.cuda.is_available())
    if args.loop == "transformer" and torch is None:
        print("transformer loop needs torch (CPU or CUDA)", file=sys.stderr)
        return 2
    mode = args.recorder
    sources = ("host", "nvml", "sched", "cupti")
    if mode == "torch_profiler":
        sources = ("host",)  # steps for the metric; torch.profiler owns CUPTI
    rec = FlightRecorder(mode="nocupti" if mode == "torch_profiler" else mode, incident_id=args.incident, incidents_dir=args.incidents_dir, sources=sources,
                         trigger=LatencyTrigger(k=3.0, warmup_steps=20, window_steps=64, cooldown_steps=10_000),
                         cupti_mode="triggered", gpu_window_steps=args.gpu_window)
    body, sync = (transformer if args.loop == "transformer" else launch_bound)(torch, cuda, rec)
    for i in range(5):  # warm-up outside the recorder: allocator, cuBLAS handles, autotuning
        body(-1 - i)
    sync()
    prof = None
    if mode == "torch_profiler":
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        prof = profile(activities=acts)
        prof.__enter__()
    capture = args.incident is not None and "STALLCASE_TRIAL_ARM" not in os.environ
    with rec:
        for i in range(args.steps):
            with rec.step(i):
                body(i)
                if i == args.slow_step and capture:
                    time.sleep(0.05)
                if args.sync_every and (i + 1) % args.sync_every == 0:
                    sync()
        sync()
        if prof is not None:
            prof.__exit__(None, None, None)
        if capture:
            rec.snapshot("workload_boundary")
    print(f"loop {args.loop} recorder {mode} device {'cuda' if cuda else 'cpu'} steps {args.steps} "
          f"span_path {getattr(rec.host, 'span_path', None)} cupti {rec.cupti_mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
