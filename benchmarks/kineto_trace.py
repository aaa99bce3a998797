"""Synthetic Kineto traces with known answers, in current and older category spellings.

    python tests/fixtures/kineto/generate.py            # (re)writes the committed fixtures from these
    synthetic_trace(steps=..., kernels_per_step=..., style="new"|"old", rank=0)  -> dict

Steps cycle through four kinds, so each injected cause sits on known steps:
    step % 4 == 0  compute: kernels back to back                      -> gpu_bound
    step % 4 == 1  sync: cudaStreamSynchronize, then 3 ms host logging -> host_submission (the refill
                   is the log_metrics span's; sync_stall reports it as refill_in_spans_ns)
    step % 4 == 2  dataloader wait of 4 ms before launching           -> input_starvation
    step % 4 == 3  3 ms of host work (no sync, no wait) before launch -> host_submission
                   (unresolved: Kineto has no scheduler evidence)
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

KERNEL_US = 50.0
LAUNCH_US = 5.0
BASE_NS = 1_764_460_800_000_000_000  # 2025-11-30T00:00:00Z
OLD_EPOCH_US = 1_764_460_800_000_000.0

CATS = {
    "new": {"kernel": "kernel", "runtime": "cuda_runtime", "memcpy": "gpu_memcpy", "memset": "gpu_memset",
            "op": "cpu_op", "annotation": "user_annotation"},
    "old": {"kernel": "Kernel", "runtime": "Runtime", "memcpy": "Memcpy", "memset": "Memset",
            "op": "Operator", "annotation": "user_annotation"},
}
STEP_KINDS = ("compute", "sync", "dataloader", "host")


class _Trace:
    def __init__(self, style: str, pid: int, tid: int, device: int, t0_us: float):
        self.c = CATS[style]
        self.pid, self.tid, self.device = pid, tid, device
        self.t0 = t0_us
        self.events: list[dict] = []
        self.corr = 1

    def x(self, cat, name, ts, dur, pid=None, tid=None, args=None):
        self.events.append({"ph": "X", "cat": self.c.get(cat, cat), "name": name, "pid": self.pid if pid is None else pid,
                            "tid": self.tid if tid is None else tid, "ts": round(self.t0 + ts, 3), "dur": round(dur, 3),
                            "args": args or {}})

    def launch(self, host_us: float, gpu_us: float, name: str, dur_us: float, stream: int = 7) -> float:
        """cudaLaunchKernel at host_us and its kernel at max(gpu_us, launch end); returns kernel end."""
        c = self.corr
        self.corr += 1
        self.x("runtime", "cudaLaunchKernel", host_us, LAUNCH_US, args={"cbid": 211, "correlation": c})
        start = max(gpu_us, host_us + LAUNCH_US)
        self.x("kernel", name, start, dur_us, pid=self.device, tid=stream,
               args={"queued": 0, "device": self.device, "context": 1, "stream": stream, "correlation": c,
                     "registers per thread": 128, "grid": [132, 1, 1], "block": [256, 1, 1]})
        self.events.append({"ph": "s", "id": c, "pid": self.pid, "tid": self.tid, "ts": round(self.t0 + host_us, 3), "cat": "ac2g", "name": "ac2g"})
        return start + dur_us

    def burst(self, host_us: float, gpu_us: float, n: int, dur_us: float = KERNEL_US) -> tuple[float, float]:
        """n launches back to back; returns (host time after, GPU time after)."""
        op_start = host_us
        for i in range(n):
            gpu_us = self.launch(host_us, gpu_us, "ampere_bf16_s16816gemm" if i % 2 else "vectorized_elementwise_kernel", dur_us,
                                 stream=7 if i % 5 else 13)
            host_us += LAUNCH_US + 1.0
        self.x("op", "aten::mm", op_start, host_us - op_start)
        return host_us, gpu_us


def synthetic_trace(*, steps: int = 8, kernels_per_step: int = 40, style: str = "new", rank: int | None = 0,
                    world_size: int = 1) -> dict:
    pid, tid = 4242 + (rank or 0), 4242 + (rank or 0)
    t0 = 0.0 if style == "new" else OLD_EPOCH_US
    tr = _Trace(style, pid, tid, device=rank or 0, t0_us=t0)
    host = gpu = 100.0
    # One H2D copy and a memset before the loop.
    tr.x("runtime", "cudaMemcpyAsync", host, 10.0, args={"cbid": 41, "correlation": 900_000})
    tr.x("memcpy", "Memcpy HtoD (Pageable -> Device)", host + 12.0, 30.0, pid=tr.device, tid=7,
         args={"device": tr.device, "stream": 7, "correlation": 900_000, "bytes": 1 << 20})
    tr.x("memset", "Memset (Device)", host + 50.0, 2.0, pid=tr.device, tid=7, args={"device": tr.device, "stream": 7, "correlation": 900_001, "bytes": 4096})
    host = gpu = 200.0
    for s in range(steps):
        kind = STEP_KINDS[s % 4]
        start = host
        if kind == "dataloader":
            tr.x("annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", host, 4000.0)
            host += 4000.0
        elif kind == "host":
            tr.x("op", "aten::index", host, 3000.0)
            host += 3000.0
        host, gpu = tr.burst(host, max(gpu, host), kernels_per_step)
        if kind == "sync":
            tr.x("runtime", "cudaStreamSynchronize", host, gpu - host + 3.0, args={"cbid": 131, "correlation": 800_000 + s})
            host = gpu + 3.0
            tr.x("op", "log_metrics", host, 3000.0)
            host += 3000.0
        host = max(host, gpu) + 5.0
        tr.x("annotation", f"ProfilerStep#{s}", start, host - start)
    tr.events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                      "ts": t0, "dur": host, "args": {"Op count": 0}})
    tr.events.append({"name": "process_name", "ph": "M", "ts": t0, "pid": pid, "tid": 0, "args": {"name": "python3"}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    doc["traceEvents"] = tr.events
    doc["traceName"] = f"rank{rank}.json"
    if style == "new":
        doc["displayTimeUnit"] = "ms"
        doc["baseTimeNanoseconds"] = BASE_NS
    return doc


def write(doc: dict, path: Path) -> Path:
    """Kineto's own layout: one event per line-ish, indented."""
    text = json.dumps(doc, indent=1)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
