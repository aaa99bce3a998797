"""Real NCCL flight-recorder dumps of a hang, on ONE GPU: a group of one whose op cannot start.

Run (one call, well under a minute of work; writes $OUT/fr_hang.tar.gz and $OUT/log):

    NCCL_NVLS_ENABLE=0 python3 examples/gpu/fr_hang_dumps.py

Two jobs run side by side, each in its own processes (argv lists, no shell), each killed
after a wall limit:

  solo  world of 1 rank on cuda:0, plus a second group of the same rank (`new_group([0])`).
        Five all_reduces on the world group and one on the sub-group complete; then a GPU
        spin kernel (`torch.cuda._sleep`) is queued on the compute stream and one more
        world all_reduce after it: its NCCL stream waits for the spin, so the op stays
        `scheduled` on the device, as a rank whose GPU stopped would. Dumps taken:
          solo_completed.pkl / .json       `_dump_nccl_trace()` after the completed ops
          solo_pending.pkl                 the same while the last op is pending
          solo_pending_only.pkl / .json    `onlyActive=True`: only the pending entries
          timeout_rank_0                   written by the watchdog itself on the op's
                                           timeout (TORCH_NCCL_DUMP_ON_TIMEOUT=1, 5 s)
  pair  two processes on the same GPU (world of 2): rank 1 skips the third all_reduce.
        NCCL refuses two ranks on one device in one communicator in the versions we know
        of; the job records what happened (`pair_rank<r>.log`) and keeps any dump.

`meta.json` has torch, NCCL, driver and per-job return codes. Dumps carry no hostnames.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

FR_ENV = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_ENABLE_TIMING": "1",
          "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "NCCL_NVLS_ENABLE": "0", "PYTHONUNBUFFERED": "1"}
TIMEOUT_S = 5          # the process group's collective timeout
JOB_WALL_S = 60        # each job is killed after this
SPIN_CYCLES = 60_000_000_000  # ~30 s at 1.98 GHz: far past the timeout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dump(c10d, path: Path, only_active: bool = False, as_json: bool = False) -> None:
    try:
        if as_json:
            data = c10d._dump_nccl_trace_json(includeCollectives=True, onlyActive=only_active)
            path.write_text(data if isinstance(data, str) else data.decode())
        else:
            path.write_bytes(c10d._dump_nccl_trace(includeCollectives=True, includeStackTraces=False,
                                                   onlyActive=only_active))
        print(f"dumped {path.name} ({path.stat().st_size} bytes)", flush=True)
    except Exception as exc:  # a dump that fails is reported, the job goes on
        print(f"dump {path.name} failed: {type(exc).__name__}: {exc}", flush=True)


def solo(out: Path) -> int:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    c10d = torch._C._distributed_c10d
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=0, world_size=1, timeout=timedelta(seconds=TIMEOUT_S), device_id=dev)
    sub = dist.new_group([0])
    x = torch.ones(1 << 20, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    dist.all_reduce(x, group=sub)
    torch.cuda.synchronize()
    time.sleep(1.0)  # the watchdog polls: let it see the completions
    _dump(c10d, out / "solo_completed.pkl")
    _dump(c10d, out / "solo_completed.json", as_json=True)
    torch.cuda._sleep(SPIN_CYCLES)
    t0 = time.time_ns()
    dist.all_reduce(x)  # waits on the device for the spin kernel
    print(f"pending all_reduce enqueued at {t0}", flush=True)
    time.sleep(1.5)
    _dump(c10d, out / "solo_pending.pkl")
    _dump(c10d, out / "solo_pending_only.pkl", only_active=True)
    _dump(c10d, out / "solo_pending_only.json", only_active=True, as_json=True)
    print("waiting for the watchdog's timeout dump", flush=True)
    time.sleep(JOB_WALL_S)
    return 0


def pair(out: Path, rank: int) -> int:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    c10d = torch._C._distributed_c10d
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=2, timeout=timedelta(seconds=TIMEOUT_S), device_id=dev)
    x = torch.ones(1 << 16, device=dev)
    for i in range(3):
        if rank == 1 and i == 2:
            break  # rank 1 never joins the third collective
        dist.all_reduce(x)
        torch.cuda.synchronize()
        print(f"rank {rank} all_reduce {i + 1} done", flush=True)
    time.sleep(1.0)
    _dump(c10d, out / f"pair_direct_rank_{rank}.pkl")
    time.sleep(JOB_WALL_S)
    return 0


def _run(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _wait(procs: dict[str, subprocess.Popen], wall_s: float) -> dict[str, int | None]:
    deadline = time.monotonic() + wall_s
    rcs: dict[str, int | None] = {}
    for name, p in procs.items():
        try:
            rcs[name] = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()  # our own child, by its handle
            p.wait()
            rcs[name] = None
    return rcs


def main() -> int:
    out = Path(os.environ.get("OUT", "out")) / "fr_hang"
    out.mkdir(parents=True, exist_ok=True)
    me = os.path.abspath(__file__)
    procs = {}
    env = dict(os.environ, **FR_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(out / "timeout_rank_"))
    procs["solo"] = _run([sys.executable, me, "solo", str(out)], env, out / "solo.log")
    penv = dict(os.environ, **FR_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(out / "pair_timeout_rank_"))
    for r in (0, 1):
        procs[f"pair{r}"] = _run([sys.executable, me, "pair", str(out), str(r)], penv, out / f"pair_rank{r}.log")
    t0 = time.monotonic()
    # The solo job has what it needs once the watchdog wrote its dump; do not wait longer.
    # Each job has what it needs once its watchdog wrote the timeout dump (or it died).
    def done(job: str, dump: str) -> bool:
        return (out / dump).exists() or all(p.poll() is not None for n, p in procs.items() if n.startswith(job))

    while time.monotonic() - t0 < 32 and not (done("solo", "timeout_rank_0") and done("pair", "pair_timeout_rank_0")):
        time.sleep(0.5)
    time.sleep(2.0)  # let the writer finish the file
    rcs = _wait(procs, 1.0)
    meta = {"return_codes": rcs, "seconds": round(time.monotonic() - t0, 1), "env": FR_ENV,
            "timeout_s": TIMEOUT_S, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        import torch

        v = torch.cuda.nccl.version()
        meta.update(torch=torch.__version__, nccl=".".join(map(str, v)) if isinstance(v, tuple) else str(v),
                    device=torch.cuda.get_device_name(0))
        meta["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, check=False).stdout.strip()
    except Exception as exc:
        meta["meta_error"] = repr(exc)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    for p in sorted(out.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    for log in sorted(out.glob("*.log")):
        print(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    with tarfile.open(out.parent / "fr_hang.tar.gz", "w:gz") as tar:
        tar.add(out, arcname="fr_hang")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "solo":
        sys.exit(solo(Path(sys.argv[2])))
    if len(sys.argv) >= 4 and sys.argv[1] == "pair":
        sys.exit(pair(Path(sys.argv[2]), int(sys.argv[3])))
    sys.exit(main())
