"""Two ranks on 2xH200 with late arrivals of known size at known steps; NCCL flight-recorder dumps out.

Run (one call, about a minute; writes 7 files under $OUT/h200x2_collectives/):

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python3 examples/gpu/two_rank_collectives.py

Without LOCAL_RANK set it starts itself under `torch.distributed.run --standalone
--nproc_per_node=2` with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_ENABLE_TIMING=1
(argv list, no shell). Each step: compute (bf16 matmuls), all_reduce on the world group,
all_reduce on a 2-rank sub-group, then a host sync (as `loss.item()` would), so a host
sleep before the step's compute reaches the GPU one-for-one. Injected: rank 1 sleeps
30 ms at steps 5 and 12, rank 0 sleeps 50 ms at step 20; a profiled window (steps
100-105, torch.profiler, Kineto trace per rank) has rank 1 sleep 20 ms at step 103.

Output ($OUT/h200x2_collectives/, flat, so the device tool brings every file back):
  nccl_trace_rank_<r>             FR pickle (`_dump_nccl_trace`, no stack traces)
  nccl_trace_json_rank_<r>.json   the same buffer as JSON (`_dump_nccl_trace_json`)
  truth.json                      steps (time.time_ns, realtime like FR) and injections per rank
  kineto_rank_<r>.json.gz         torch.profiler trace of the profiled window
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
FR_ENV = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_ENABLE_TIMING": "1"}
STEPS = 30
# (step, rank) -> host sleep in ms, before that step's compute
INJECT = {(5, 1): 30, (12, 1): 30, (20, 0): 50}
PROFILED = range(100, 106)
INJECT_PROFILED = {(103, 1): 20}
WARMUP = 3


def launch() -> int:
    out = Path(os.environ.get("OUT", "out")) / "h200x2_collectives"
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **SAFE_ENV, **FR_ENV, STALLCASE_FIXTURE_DIR=str(out))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", os.path.abspath(__file__)]
    rc = subprocess.run(cmd, env=env, check=False).returncode
    if rc == 0:
        for p in sorted(out.iterdir()):
            print(f"{p.name}: {p.stat().st_size} bytes")
    return rc


def _dump_fr(torch, out: Path, rank: int) -> None:
    c10d = torch._C._distributed_c10d
    try:
        data = c10d._dump_nccl_trace(includeCollectives=True, includeStackTraces=False, onlyActive=False)
    except TypeError:
        data = c10d._dump_nccl_trace()
    (out / f"nccl_trace_rank_{rank}").write_bytes(data)
    dump_json = getattr(c10d, "_dump_nccl_trace_json", None)
    if dump_json is not None:
        try:
            text = dump_json(includeCollectives=True, onlyActive=False)
        except TypeError:
            text = dump_json()
        (out / f"nccl_trace_json_rank_{rank}.json").write_text(text if isinstance(text, str) else text.decode())


def _nccl_version(torch) -> str:
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def worker() -> int:
    import torch
    import torch.distributed as dist

    for k, v in SAFE_ENV.items():
        if os.environ.get(k) != v:
            raise SystemExit(f"{k} must be {v} (NVLink multicast stays off on the lent machines)")
    out = Path(os.environ["STALLCASE_FIXTURE_DIR"])
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    world = dist.get_world_size()
    try:
        sub = dist.new_group(list(range(world)), group_desc="sub")
    except TypeError:
        sub = dist.new_group(list(range(world)))

    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    grad = torch.randn(16 * 1024 * 1024, device=device, dtype=torch.float32)  # 64 MiB
    small = torch.ones(1024, device=device, dtype=torch.float32)

    from torch.profiler import ProfilerActivity, profile, record_function

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from workflow_lib.capture import FlightRecorder

    # stallcase's own recorder beside PyTorch's: it reads the same NCCL flight recorder at
    # snapshot time (source "collectives") and adds steps, spans and scheduler evidence.
    rec = FlightRecorder(incident_id=f"rank{rank}", incidents_dir=str(out / "recorder"),
                         sources=("host", "sched", "nvml", "collectives"))
    rec.start()

    def step(sid: int, inject: dict) -> dict:
        t0 = time.time_ns()
        slept = None
        delay_ms = inject.get((sid, rank))
        if delay_ms:
            s0 = time.time_ns()
            time.sleep(delay_ms / 1000)
            slept = time.time_ns() - s0
        with rec.step(sid) if sid >= 0 else contextlib.nullcontext(), record_function(f"ProfilerStep#{sid}"):
            x = a
            for _ in range(8):
                x = x @ b
            dist.all_reduce(grad)
            dist.all_reduce(small, group=sub)
            torch.cuda.synchronize()
        return {"step_id": sid, "start_ns": t0, "end_ns": time.time_ns(), "slept_ns": slept}

    def align() -> None:
        # Outside any step: absorbs whatever made one rank late (setup, profiler start),
        # so only injected sleeps make a numbered step wait.
        dist.barrier()
        torch.cuda.synchronize()

    steps = [step(-1 - i, {}) for i in range(WARMUP)]  # communicators up, kernels loaded; negative ids
    gc.disable()  # a collection inside a step would be an uninjected late arrival
    align()
    steps += [step(s, INJECT) for s in range(STEPS)]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        align()
        for s in PROFILED:
            steps.append(step(s, INJECT_PROFILED))
    gc.enable()
    trace = out / f".kineto_rank_{rank}.json"
    prof.export_chrome_trace(str(trace))
    with open(trace, "rb") as src, gzip.open(out / f"kineto_rank_{rank}.json.gz", "wb", compresslevel=9) as dst:
        dst.write(src.read())
    trace.unlink()

    dist.barrier()
    torch.cuda.synchronize()
    time.sleep(3)  # the watchdog retires completed work (and stores duration_ms) on its own cadence
    _dump_fr(torch, out, rank)
    rec.snapshot("workload_boundary")
    rec.stop()

    mine = {"rank": rank, "steps": steps, "hostname": socket.gethostname(), "pid": os.getpid()}
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        truth = {
            "clock": "realtime: time.time_ns(), the clock of the flight recorder's time_created_ns",
            "world_size": world, "torch": torch.__version__, "nccl": _nccl_version(torch),
            "env": {k: os.environ.get(k) for k in [*SAFE_ENV, *FR_ENV]},
            "injected": [{"step_id": s, "rank": r, "delay_ns": ms * 1_000_000} for (s, r), ms in
                         sorted({**INJECT, **INJECT_PROFILED}.items())],
            "profiled_steps": list(PROFILED),
            "ranks": {str(g["rank"]): g for g in gathered},
        }
        (out / "truth.json").write_text(json.dumps(truth, indent=1))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(worker() if "LOCAL_RANK" in os.environ else launch())
