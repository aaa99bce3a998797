"""H200 capture: a workload with one injected cause per step kind, profiled by torch.profiler
(Kineto), then imported and diagnosed; prints which check each step got against the truth.

Run on a GPU machine (one call, well under a minute of GPU time):

    OUT=/path/to/out python3 benchmarks/gpu_kineto_capture.py

Writes under $OUT:
    kineto/rank0.json.gz   the Kineto trace (keep it: it is a real fixture for tests)
    truth.json             step id -> injected cause
    incidents/h200/        the imported incident
    diagnosis.json         the diagnosis
    agreement.json         per step: expected check, verdicts, match
Step kinds cycle (step id % 4): compute (GPU-bound matmuls), sync (.item() then 8 ms host
logging), dataloader (8 ms in a 'data_wait' span), host (8 ms of host work, no sync, no wait).
The host step must come out `unresolved` (Kineto has no scheduler evidence); run it under
the recorder as well to get the attributed counterpart and the Kineto-vs-recorder numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ("compute", "sync", "dataloader", "host")
EXPECTED = {"compute": "gpu_bound", "sync": "sync_stall", "dataloader": "input_starvation", "host": "host_submission"}
PAUSE_S = 0.008


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): its CPU path (no CUDA: CPU "
                    "activities only, small matrices, 8 steps) into $OUT or a temp dir; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    cuda = torch.cuda.is_available()
    if not (cuda or args.smoke):
        raise SystemExit("gpu_kineto_capture: needs a CUDA GPU (--smoke runs its CPU path)")
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-kineto-"))
    (out / "kineto").mkdir(parents=True, exist_ok=True)
    trace = out / "kineto" / "rank0.json.gz"
    dev = torch.device("cuda" if cuda else "cpu")
    size = 128 if args.smoke else 4096
    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(10):  # warm cuBLAS
        a @ b
    sync()
    steps = 2 + (8 if args.smoke else 24)
    truth = {}
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []),
                 schedule=schedule(wait=1, warmup=1, active=steps - 2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        for i in range(steps):
            kind = KINDS[i % 4]
            truth[i] = kind
            if kind == "dataloader":
                with record_function("data_wait"):
                    time.sleep(PAUSE_S)
            elif kind == "host":
                with record_function("host_work"):
                    _spin(PAUSE_S)
            with record_function("forward"):
                c = a
                for _ in range(2 if args.smoke else 20):
                    c = c @ b
                    c = c * 0.001
            if kind == "sync":
                with record_function("log_metrics"):
                    float(c.float().sum().item())
                    _spin(PAUSE_S)
            prof.step()
    sync()
    (out / "truth.json").write_text(json.dumps(truth, indent=1))
    print(f"trace: {trace} ({trace.stat().st_size / 2**20:.1f} MiB)")

    from workflow_lib.diagnose import diagnose_dir
    from workflow_lib.importers.kineto import import_kineto

    inc = import_kineto([trace], incident_id="h200", incidents_dir=out / "incidents")
    rec = diagnose_dir(inc, out_path=out / "diagnosis.json")
    rows, ok = [], 0
    for st in rec["steps"]:
        kind = truth.get(st["step_id"])
        verdicts = {f["check"]: f["verdict"] for f in st["findings"]}
        exp = EXPECTED.get(kind)
        want = "unresolved" if kind == "host" else "attributed"
        match = exp is not None and verdicts.get(exp) == want
        ok += match
        rows.append({"step_id": st["step_id"], "kind": kind, "expected_check": exp, "expected_verdict": want,
                     "verdicts": verdicts, "match": match, "wall_ns": st["wall_ns"], "busy_ns": st["busy_ns"],
                     "kernel_sum_ns": st["kernel_sum_ns"]})
        busy = "not observed" if st["busy_ns"] is None else f"{st['busy_ns'] / 1e6:.2f} ms"  # a CPU trace has no kernels
        print(f"step {st['step_id']:>3} {kind:>10}: {exp}={verdicts.get(exp)} (want {want}) wall {st['wall_ns'] / 1e6:.2f} ms busy {busy}")
    (out / "agreement.json").write_text(json.dumps({"matched": ok, "steps": len(rows), "rows": rows}, indent=1))
    print(f"{ok}/{len(rows)} steps attributed as injected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
