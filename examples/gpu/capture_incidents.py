"""Capture real incidents with known, injected causes on a GPU (fixtures for diagnosis tests).

    OUT=/some/dir python examples/gpu/capture_incidents.py [--steps 100] [--inject 60-69]

Three scenarios, each a small training loop (4 Linear+GELU layers, bf16, SGD) under the
FlightRecorder, with one cause injected at known steps:

  host_gap       a busy host loop of --gap-ms inside span "host.cpu_gap" between the
                 forward and backward launches: the GPU idles while the host spins;
  blocking_sync  a `.item()` after every layer (span "sync.item") and a
                 `torch.cuda.synchronize()` after backward (span "sync.cuda_synchronize"):
                 the host waits on the GPU instead of queueing work ahead;
  starved_queue  the producer thread slows by --starve-ms per batch, so the consumer
                 waits in span "dataloader.queue_wait" while the queue depth stays below
                 its threshold.

Every step ends with `loss.item()` (span "log.loss_item"), as logging loops do, so step
times reflect GPU work. Each scenario runs twice, each in its own process:
  A  recorder with sources host, nvml, sched, cupti -> $OUT/incidents/<scenario>/
  B  the same loop under torch.profiler, recorder without cupti (torch.profiler and
     cupti-python both own CUPTI) -> $OUT/incidents/<scenario>-kineto/ with the Kineto
     trace beside the manifest as kineto.pt.trace.json.gz
and $OUT/incidents/<scenario>/truth.json records cause, steps, injected ms and how
the runs were split. Without cupti-python, run A still completes and its manifest says
cupti not_observed ("cupti-python absent").

The loop body is backend-neutral (`Backend`), so tests run the same injections on CPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from workflow_lib.capture import Budget, FlightRecorder  # noqa: E402

SCENARIOS = ("host_gap", "blocking_sync", "starved_queue")
QUEUE_MAX = 4
QUEUE_THRESHOLD = 2  # a healthy producer keeps at least this many batches queued


def busy_wait_ms(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


class Producer(threading.Thread):
    """Makes batches into a bounded queue; `delay_s` slows it (the starved-input cause)."""

    def __init__(self, make_batch, steps: int):
        super().__init__(name="producer", daemon=True)
        self.q: queue.Queue = queue.Queue(maxsize=QUEUE_MAX)
        self.make_batch, self.steps = make_batch, steps
        self.delay_for: dict[int, float] = {}

    def run(self) -> None:
        for i in range(self.steps):
            d = self.delay_for.get(i, 0.0)
            if d:
                time.sleep(d)
            self.q.put((i, self.make_batch()))


class TorchBackend:
    """A GPU-bound MLP step (about 2 ms of bf16 matmuls on an H200) fed from pinned batches.

    The input batches come from a small pool made once, so the producer is never the
    bottleneck unless a delay is injected: a cause must show only where it was injected.
    (A producer that pins a fresh tensor per batch spends ~25 ms in cudaHostAlloc and starves
    every step, which hides every other cause.)
    """

    def __init__(self, width_in: int = 1024, width: int = 4096, batch: int = 4096, pool: int = QUEUE_MAX + 4):
        import torch

        self.torch = torch
        self.dev = torch.device("cuda")
        torch.manual_seed(0)
        dims = [width_in] + [width] * 4
        self.layers = [torch.nn.Linear(dims[k], dims[k + 1], device=self.dev, dtype=torch.bfloat16) for k in range(4)]
        self.params = [p for layer in self.layers for p in layer.parameters()]
        self.pool = [torch.randn(batch, width_in, dtype=torch.bfloat16).pin_memory() for _ in range(pool)]
        self._next = 0

    def make_batch(self):
        x = self.pool[self._next % len(self.pool)]
        self._next += 1
        return x

    def forward(self, x, rec, sync_each_layer: bool):
        x = x.to(self.dev, non_blocking=True)
        for layer in self.layers:
            x = self.torch.nn.functional.gelu(layer(x))
            if sync_each_layer:
                with rec.span("sync.item"):
                    x.sum().item()
        return x.float().pow(2).mean()

    def backward(self, loss):
        loss.backward()

    def optimizer(self):
        with self.torch.no_grad():
            for p in self.params:
                p.add_(p.grad, alpha=-1e-4)
                p.grad = None

    def sync(self):
        self.torch.cuda.synchronize()

    def item(self, loss) -> float:
        return float(loss.item())


def run_loop(backend, rec: FlightRecorder, scenario: str, steps: int, inject: set[int], gap_ms: float,
             starve_ms: float) -> dict:
    """The training loop with one cause injected at `inject` steps; returns what was injected."""
    prod = Producer(backend.make_batch, steps)
    if scenario == "starved_queue":
        prod.delay_for = {i: starve_ms / 1000 for i in inject}
    depth: dict[int, int] = {}
    prod.start()
    for i in range(steps):
        with rec.step(i):
            with rec.span("dataloader.queue_wait"):
                depth[i] = prod.q.qsize()
                _, x = prod.q.get()
            with rec.span("forward"):
                loss = backend.forward(x, rec, sync_each_layer=(scenario == "blocking_sync" and i in inject))
            if scenario == "host_gap" and i in inject:
                with rec.span("host.cpu_gap"):
                    busy_wait_ms(gap_ms)
            with rec.span("backward"):
                backend.backward(loss)
            if scenario == "blocking_sync" and i in inject:
                with rec.span("sync.cuda_synchronize"):
                    backend.sync()
            with rec.span("optimizer"):
                backend.optimizer()
            with rec.span("log.loss_item"):
                backend.item(loss)
    prod.join(timeout=30)
    truth = {"scenario": scenario, "steps_total": steps, "injected_steps": sorted(inject)}
    if scenario == "host_gap":
        truth.update(cause="host_cpu_gap", span="host.cpu_gap", injected_ms=gap_ms)
    elif scenario == "blocking_sync":
        truth.update(cause="blocking_sync", span=["sync.item", "sync.cuda_synchronize"],
                     syncs_per_injected_step=len(getattr(backend, "layers", [])) + 1, injected_ms=None)
    else:
        truth.update(cause="starved_input_queue", span="dataloader.queue_wait", injected_ms=starve_ms,
                     queue_max=QUEUE_MAX, queue_threshold=QUEUE_THRESHOLD,
                     queue_depth_at_get={str(k): v for k, v in sorted(depth.items())})
    return truth


def _phase(args) -> int:
    """One run (A: cupti, B: kineto) of one scenario, in this process."""
    out = Path(os.environ["OUT"])
    inc_dir = out / "incidents"
    inject = _parse_steps(args.inject)
    sources = ("host", "nvml", "sched", "cupti") if args.phase == "cupti" else ("host", "nvml", "sched")
    incident_id = args.scenario.replace("_", "-") + ("" if args.phase == "cupti" else "-kineto")
    # 5 ms scheduler sampling: the 15 ms host gap is bracketed by samples (see Budget.sched_period_s);
    # the CPU target is raised to match, so the sampler does not back off during the run.
    budget = Budget(retained_bytes=64 << 20, window_ns=120 * 10**9, sched_period_s=0.005, cpu_share_target=0.05)
    backend = TorchBackend()
    for _ in range(10):  # warm-up outside the recording: allocator, cuBLAS handles
        backend.backward(backend.forward(backend.make_batch(), _NullRec(), False))
        backend.optimizer()
    backend.sync()
    rec = FlightRecorder(incident_id=incident_id, incidents_dir=str(inc_dir), budget=budget, sources=sources)
    rec.declare_source(__file__)
    prof = None
    if args.phase == "kineto":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof.__enter__()
    rec.start()
    truth = run_loop(backend, rec, args.scenario, args.steps, inject, args.gap_ms, args.starve_ms)
    backend.sync()
    path = rec.snapshot("workload_boundary")
    rec.stop()
    if prof is not None:
        prof.__exit__(None, None, None)
        raw = out / f".{incident_id}.json"
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as fin, gzip.open(path / "kineto.pt.trace.json.gz", "wb", compresslevel=9) as fout:
            shutil.copyfileobj(fin, fout)
        raw.unlink()
    truth["run"] = args.phase
    (path / f"truth.{args.phase}.json").write_text(json.dumps(truth, indent=2) + "\n")
    print(f"{args.scenario}/{args.phase}: {path} cupti={rec.cupti is not None and rec.cupti.reason_absent is None}")
    return 0


class _NullRec:
    def span(self, name):
        from workflow_lib.capture.steps import NULL_SPAN as _NULL_SPAN

        return _NULL_SPAN


def _parse_steps(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--inject", default="60-69", help="steps with the cause, e.g. 60-69 or 40,80")
    ap.add_argument("--gap-ms", type=float, default=15.0)
    ap.add_argument("--starve-ms", type=float, default=20.0)
    ap.add_argument("--scenario", choices=SCENARIOS, default=None)
    ap.add_argument("--phase", choices=("cupti", "kineto"), default=None)
    args = ap.parse_args(argv)
    if not os.environ.get("OUT"):
        print("error: set OUT to the output directory", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("error: torch is not installed; this script captures GPU incidents", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: torch.cuda.is_available() is False; run on a GPU machine", file=sys.stderr)
        return 2
    if args.phase:
        return _phase(args)
    # Orchestrator: every run in its own process, so CUPTI state never carries over.
    status = {}
    for sc in [args.scenario] if args.scenario else SCENARIOS:
        for phase in ("cupti", "kineto"):
            cmd = [sys.executable, __file__, "--scenario", sc, "--phase", phase, "--steps", str(args.steps),
                   "--inject", args.inject, "--gap-ms", str(args.gap_ms), "--starve-ms", str(args.starve_ms)]
            r = subprocess.run(cmd, timeout=300)
            status[f"{sc}/{phase}"] = r.returncode
        a = Path(os.environ["OUT"]) / "incidents" / sc.replace("_", "-")
        if (a / "truth.cupti.json").exists():
            truth = json.loads((a / "truth.cupti.json").read_text())
            truth["runs"] = {
                "cupti": f"incidents/{a.name} (recorder: host, nvml, sched, cupti)",
                "kineto": f"incidents/{a.name}-kineto (recorder: host, nvml, sched; torch.profiler trace "
                          f"kineto.pt.trace.json.gz) - a second identical run, because torch.profiler and "
                          f"cupti-python both own CUPTI",
            }
            (a / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    print(json.dumps(status))
    return 0 if all(v == 0 for v in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
