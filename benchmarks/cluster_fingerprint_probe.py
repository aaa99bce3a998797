"""GPU probe: what preflight sees on a multi-GPU node that other jobs share.

On SLURM a block job holds one GPU of a node; other GPUs of that node may belong to
other jobs. This probe measures, on a real multi-GPU machine, what the environment
fingerprint (workflow_lib.core.environment, which preflight compares with the capture's)
reads in that situation:

1. the fingerprint with no CUDA_VISIBLE_DEVICES, and with CUDA_VISIBLE_DEVICES=0 and =1
   (what a SLURM job without cgroup device limits sees): NVML enumerates devices itself,
   so a difference here would mean the fingerprint follows the job's GPU;
2. the fingerprint for a job on GPU 0 while a neighbour keeps the last GPU busy (bf16
   matmuls), and again after the neighbour stopped: a difference means a block's
   preflight is blocked by someone else's work on the same node.

Each fingerprint is taken in a fresh process (as preflight is). Writes under $OUT:
fingerprints.json (every fingerprint), differences.json (each against the first),
nvidia_smi.txt (device state at each step) and summary.txt.

Run on the GPU machine from the repository root (needs torch and nvidia-ml-py;
two or more GPUs show the neighbour case, one GPU falls back to loading GPU 0):
    OUT=/path/to/out python3 benchmarks/cluster_fingerprint_probe.py
About one minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workflow_lib.core import environment  # noqa: E402

FINGERPRINT = ("import json, sys; sys.path.insert(0, sys.argv[1]); from workflow_lib.core import environment; "
               "json.dump(environment.fingerprint(with_nvcc=False), sys.stdout, default=str)")
# A neighbour job: bf16 matmuls until killed, so the GPU is busy and not at idle clocks.
LOAD = ("import torch; a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = a.clone()\n"
        "print('loaded', flush=True)\n"
        "while True:\n    a = (a @ b).tanh_()\n    torch.cuda.synchronize()")
LOAD_SETTLE_S = 8.0
AFTER_LOAD_SETTLE_S = 8.0


def fingerprint(visible: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    proc = subprocess.run([sys.executable, "-c", FINGERPRINT, str(REPO)], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(proc.stdout)


def nvidia_smi() -> str:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "nvidia-smi not on PATH\n"
    fields = "index,uuid,utilization.gpu,clocks.sm,clocks_event_reasons.active,power.draw,temperature.gpu"
    proc = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv"], capture_output=True, text=True,
                          timeout=60, check=False)
    return proc.stdout + proc.stderr


def main(argv=None) -> int:
    global LOAD_SETTLE_S, AFTER_LOAD_SETTLE_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): no settling waits, into $OUT "
                    "or a temp dir; without a GPU the neighbour load fails at once and the fingerprints are the CPU's")
    args = ap.parse_args(argv)
    if args.smoke:
        LOAD_SETTLE_S = AFTER_LOAD_SETTLE_S = 0.2
        os.environ.setdefault("OUT", tempfile.mkdtemp(prefix="fingerprint-probe-"))
    out = Path(os.environ.get("OUT", "cluster_fingerprint_out"))
    out.mkdir(parents=True, exist_ok=True)
    smi_log = []
    prints: dict[str, dict] = {}

    def step(name: str, visible: str | None) -> None:
        smi_log.append(f"== {name} ({time.strftime('%H:%M:%S')})\n{nvidia_smi()}")
        prints[name] = fingerprint(visible)

    step("no_cuda_visible_devices", None)
    count = prints["no_cuda_visible_devices"].get("gpu_count")
    gpus = count if isinstance(count, int) else 0
    step("cuda_visible_devices_0", "0")
    if gpus >= 2:
        step("cuda_visible_devices_1", "1")

    neighbour = str(gpus - 1) if gpus >= 1 else "0"
    load_env = dict(os.environ, CUDA_VISIBLE_DEVICES=neighbour)
    load = subprocess.Popen([sys.executable, "-c", LOAD], env=load_env, stdout=subprocess.PIPE, text=True)
    try:
        ready = load.stdout.readline().strip() if load.stdout else ""
        time.sleep(LOAD_SETTLE_S)
        step(f"job_on_gpu0_while_gpu{neighbour}_busy", "0")
        load_state = "running" if load.poll() is None else f"exited {load.returncode}"
    finally:
        load.kill()
        load.wait(timeout=30)
    time.sleep(AFTER_LOAD_SETTLE_S)
    step("job_on_gpu0_after_neighbour_stopped", "0")

    base = prints["no_cuda_visible_devices"]
    differences = {name: environment.compare(base, fp) for name, fp in prints.items()}
    (out / "fingerprints.json").write_text(json.dumps(prints, indent=2, sort_keys=True, default=str) + "\n")
    (out / "differences.json").write_text(json.dumps(differences, indent=2, sort_keys=True, default=str) + "\n")
    (out / "nvidia_smi.txt").write_text("\n".join(smi_log))
    lines = [f"gpus seen by NVML: {count}", f"neighbour load on GPU {neighbour}: {ready or 'no output'}, {load_state}"]
    for name, diffs in differences.items():
        fields = ", ".join(d["field"] for d in diffs) or "none"
        lines.append(f"{name}: differs from no_cuda_visible_devices in: {fields}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
