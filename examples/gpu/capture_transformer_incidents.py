"""A realistic training loop with six causes injected at known steps, captured twice.

    OUT=/some/dir python examples/gpu/capture_transformer_incidents.py [--tiny] [--steps 72]

The model is a small transformer (token embedding, 4 encoder layers, d=512, 8 heads, FFN
2048, bf16 autocast, AdamW), trained on a synthetic in-memory token data set read through a
real `torch.utils.data.DataLoader` (2 worker processes, prefetch 2). The loop is the one
people write: `for x, y in loader: loss = model(x); loss.backward(); opt.step()`, wrapped in
recorder spans. Causes, each on its own block of steps (`--blocks`, default four steps each):

  cpu_contention     four busy processes pinned to the training thread's CPU (started and
                     stopped between steps, outside any step window)
  gpu_work_growth    eight extra 8192x8192 bf16 matmuls in the forward (span "forward")
  host_work          20 ms of pure-Python work between forward and backward
                     (span "metrics.compute"): nothing is queued, the host is in user code
  slow_loader        the worker that loads the step's batch sleeps 150 ms in __getitem__;
                     the main thread waits in span "data.next_batch"
  blocking_sync      `.item()` after every encoder layer and `torch.cuda.synchronize()` after
                     backward (span "sync.item", "sync.cuda_synchronize")
  allocator_churn    `torch.cuda.empty_cache()` then odd-sized allocations before the forward
                     (span "alloc.churn"): cudaFree/cudaMalloc, the forward re-grows the cache

Every step ends with `loss.item()` (logging), as training loops do.

Two runs, each in its own process (torch.profiler and cupti-python both own CUPTI):
  recorder   FlightRecorder with host, nvml, sched, cupti  -> $OUT/incidents/transformer/
  kineto     the same loop under torch.profiler (recorder host only, for the truth's step
             times)                                         -> $OUT/transformer.kineto.json.gz
and $OUT/truth.json: which steps got which cause, the accepted diagnosis causes, devices.

--tiny (or no CUDA): d=32, 2 layers, 16-token sequences, batch 4, 1 worker, small
injections; runs on a CPU in seconds, so the GPU run works the first time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from workflow_lib.capture import Budget, FlightRecorder  # noqa: E402

CAUSES = ("cpu_contention", "gpu_work_growth", "host_work", "slow_loader", "blocking_sync", "allocator_churn")
# What the diagnosis must name for each injected cause (by_cause keys). Kineto carries no
# scheduler samples, so there contention can only show as host time with its state open.
ACCEPTED = {
    "cpu_contention": {"recorder": ["cpu_contention"], "kineto": ["cpu_contention", "host_submission"]},
    "gpu_work_growth": {"recorder": ["gpu_work_growth"], "kineto": ["gpu_work_growth"]},
    "host_work": {"recorder": ["host_submission"], "kineto": ["host_submission"]},
    "slow_loader": {"recorder": ["input_starvation"], "kineto": ["input_starvation"]},
    "blocking_sync": {"recorder": ["sync_stall"], "kineto": ["sync_stall"]},
    "allocator_churn": {"recorder": ["allocator_churn"], "kineto": ["allocator_churn"]},
}


def plan(steps: int, block: int) -> dict[int, str]:
    """step -> cause: six blocks of `block` steps, evenly spaced after a clean start."""
    out, gap = {}, max((steps - 8) // len(CAUSES), block + 2)
    for k, cause in enumerate(CAUSES):
        first = 8 + k * gap
        for i in range(first, min(first + block, steps)):
            out[i] = cause
    return out


class TokenData:
    """A synthetic in-memory token data set (next-token targets); item `slow_item` sleeps
    `slow_s` in the worker that loads it (the slow-loader cause)."""

    def __init__(self, n: int, seq: int, vocab: int, slow_items: set[int], slow_s: float):
        import torch

        g = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(0, vocab, (n, seq + 1), generator=g)
        self.slow_items, self.slow_s = slow_items, slow_s

    def __len__(self):
        return self.tokens.shape[0]

    def __getitem__(self, i):
        if i in self.slow_items:
            time.sleep(self.slow_s)
        t = self.tokens[i]
        return t[:-1], t[1:]


def build(tiny: bool, device):
    import torch

    d, layers, ff, vocab = (32, 2, 64, 256) if tiny else (512, 4, 2048, 8192)

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            self.layers = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(d, 8 if not tiny else 4, ff, batch_first=True,
                                                                               dropout=0.0) for _ in range(layers))
            self.head = torch.nn.Linear(d, vocab)

        def forward(self, x, rec=None, sync_each_layer=False):
            h = self.emb(x)
            for layer in self.layers:
                h = layer(h)
                if sync_each_layer:
                    with rec.span("sync.item"):
                        h.float().sum().item()
            return self.head(h)

    model = LM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, vocab


def busy_process(cpu: int) -> subprocess.Popen:
    code = "import os,sys\nos.sched_setaffinity(0,{%d})\nwhile True: pass\n" % cpu
    return subprocess.Popen([sys.executable, "-c", code])


def python_host_work(ms: float) -> float:
    """Pure-Python metrics work (a loop the GPU cannot help with)."""
    end = time.perf_counter() + ms / 1000
    acc = 0.0
    while time.perf_counter() < end:
        acc += sum(i * i for i in range(200)) * 1e-9
    return acc


def run(args) -> dict:
    import torch

    cuda = torch.cuda.is_available() and not args.tiny
    device = torch.device("cuda" if cuda else "cpu")
    tiny = args.tiny or not cuda
    seq, batch, workers = (16, 4, 1) if tiny else (256, 32, 2)
    causes = plan(args.steps, args.block)
    sizes = {"matmul": 256 if tiny else 8192, "host_ms": 8.0 if tiny else 20.0, "loader_s": 0.08 if tiny else 0.15,
             "churn_mb": 1 if tiny else 64}
    slow = {i * batch for i, c in causes.items() if c == "slow_loader"}
    torch.manual_seed(0)
    model, opt, vocab = build(tiny, device)
    w_extra = torch.randn(sizes["matmul"], sizes["matmul"], device=device, dtype=torch.bfloat16)
    data = TokenData((args.steps + 8) * batch, seq, vocab, slow, sizes["loader_s"])
    cpu = sorted(os.sched_getaffinity(0))[-1]  # the training thread's CPU (the contention target)
    others = set(os.sched_getaffinity(0)) - {cpu} or {cpu}
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=False, num_workers=workers, prefetch_factor=2,
                                         pin_memory=cuda, persistent_workers=True,
                                         worker_init_fn=lambda _: os.sched_setaffinity(0, others))
    amp = torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # Warm-up outside the recording (cuBLAS handles and heuristics, including the injected
    # matmul's shape, so its first call's host work is not part of "GPU work growth"; the
    # allocator; the autograd device thread).
    for _ in range(3):
        x = torch.randint(0, vocab, (batch, seq), device=device)
        with amp:
            loss = torch.nn.functional.cross_entropy(model(x).float().view(-1, vocab), x.view(-1))
            loss = loss + 0 * torch.mm(w_extra, w_extra)[0, 0].float()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sync()

    it = iter(loader)  # workers (and the pin-memory thread) start here, before the training thread is pinned
    rec = FlightRecorder(incident_id="transformer", incidents_dir=str(Path(os.environ["OUT"]) / "incidents"),
                         budget=Budget(retained_bytes=48 << 20, sched_period_s=0.05), sources=args.sources)
    rec.declare_source(__file__)
    prof = None
    if args.phase == "kineto":
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        prof = profile(activities=acts)
        prof.__enter__()
    rec.start()
    # Only the training thread shares its CPU with the busy processes: every other thread of
    # the process (autograd, pin-memory, recorder samplers) and the loader workers stay off it.
    me = threading.get_native_id()
    for t in os.listdir("/proc/self/task"):
        if int(t) != me:
            try:
                os.sched_setaffinity(int(t), others)
            except OSError:
                pass
    os.sched_setaffinity(0, {cpu})
    busy: list[subprocess.Popen] = []
    walls = {}
    for i in range(args.steps):
        cause = causes.get(i)
        # Contention starts before the block's first step and ends after its last, between steps.
        if cause == "cpu_contention" and not busy:
            busy = [busy_process(cpu) for _ in range(4)]
            time.sleep(0.3)  # let them start spinning
        if cause != "cpu_contention" and busy:
            for p in busy:
                p.kill()
                p.wait()
            busy = []
        t0 = time.perf_counter()
        with rec.step(i), torch.profiler.record_function(f"ProfilerStep#{i}"):
            with rec.span("data.next_batch"), torch.profiler.record_function("data.next_batch"):
                x, y = next(it)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if cause == "allocator_churn" and cuda:
                with rec.span("alloc.churn"), torch.profiler.record_function("alloc.churn"):
                    torch.cuda.empty_cache()
                    held = [torch.empty((sizes["churn_mb"] + k) << 20, dtype=torch.uint8, device=device) for k in range(8)]
                    del held
                    torch.cuda.empty_cache()
            with rec.span("forward"), torch.profiler.record_function("forward"):
                with amp:
                    logits = model(x, rec, sync_each_layer=(cause == "blocking_sync"))
                    if cause == "gpu_work_growth":
                        for _ in range(8):
                            z = torch.mm(w_extra, w_extra)
                        logits = logits + 0 * z[0, 0].float()
                    loss = torch.nn.functional.cross_entropy(logits.float().view(-1, vocab), y.view(-1))
            if cause == "host_work":
                with rec.span("metrics.compute"), torch.profiler.record_function("metrics.compute"):
                    python_host_work(sizes["host_ms"])
            with rec.span("backward"), torch.profiler.record_function("backward"):
                loss.backward()
            if cause == "blocking_sync":
                with rec.span("sync.cuda_synchronize"), torch.profiler.record_function("sync.cuda_synchronize"):
                    sync()
            with rec.span("optimizer"), torch.profiler.record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            with rec.span("log.loss_item"), torch.profiler.record_function("log.loss_item"):
                float(loss.item())
        walls[i] = time.perf_counter() - t0
    for p in busy:
        p.kill()
        p.wait()
    sync()
    path = rec.snapshot("workload_boundary")
    rec.stop()
    out = Path(os.environ["OUT"])
    if prof is not None:
        prof.__exit__(None, None, None)
        raw = out / ".kineto.json"
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as fin, gzip.open(out / "transformer.kineto.json.gz", "wb", compresslevel=9) as fout:
            shutil.copyfileobj(fin, fout)
        raw.unlink()
        shutil.rmtree(path, ignore_errors=True)  # the kineto run's own recorder incident is not kept
    truth = {
        "steps_total": args.steps, "tiny": tiny, "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__, "training_thread_cpu": cpu, "other_threads_and_workers_cpus": sorted(others),
        "injected": {c: sorted(i for i, k in causes.items() if k == c) for c in CAUSES},
        "accepted_causes": ACCEPTED, "sizes": sizes,
        "model": "embedding + %d TransformerEncoderLayer(d=%d) + head, bf16 autocast, AdamW" % (len(model.layers), model.emb.embedding_dim),
        "loader": {"num_workers": workers, "prefetch_factor": 2, "batch": batch, "seq": seq},
        "host_walls_ms_%s" % args.phase: {str(k): round(v * 1e3, 3) for k, v in walls.items()},
    }
    return truth


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=72)
    ap.add_argument("--block", type=int, default=4)
    ap.add_argument("--tiny", action="store_true", help="tiny sizes on the CPU (the script's own test)")
    ap.add_argument("--phase", choices=("recorder", "kineto"), default=None)
    args = ap.parse_args(argv)
    if not os.environ.get("OUT"):
        print("error: set OUT to the output directory", file=sys.stderr)
        return 2
    out = Path(os.environ["OUT"])
    out.mkdir(parents=True, exist_ok=True)
    if args.phase:
        args.sources = ("host", "nvml", "sched", "cupti") if args.phase == "recorder" else ("host",)
        truth = run(args)
        (out / f"truth.{args.phase}.json").write_text(json.dumps(truth, indent=2) + "\n")
        return 0
    status = {}
    for phase in ("recorder", "kineto"):
        cmd = [sys.executable, __file__, "--phase", phase, "--steps", str(args.steps), "--block", str(args.block)]
        cmd += ["--tiny"] if args.tiny else []
        status[phase] = subprocess.run(cmd, timeout=400).returncode
    truth = {}
    for phase in ("recorder", "kineto"):
        p = out / f"truth.{phase}.json"
        if p.exists():
            truth.update(json.loads(p.read_text()))
            p.unlink()
    truth["runs"] = {"recorder": "incidents/transformer (FlightRecorder: host, nvml, sched, cupti)",
                     "kineto": "transformer.kineto.json.gz (torch.profiler, CPU+CUDA activities; a second identical run)"}
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    print(json.dumps(status))
    return 0 if all(v == 0 for v in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
