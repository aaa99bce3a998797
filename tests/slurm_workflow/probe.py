"""What a job saw: host, SLURM job id, granted GPU, time. The tiny workflow's rules write it."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

SEEN_ENV = ("SLURM_JOB_ID", "SLURM_JOB_NAME", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SLURM_GPUS")


def seen() -> dict:
    """This process's view of where it runs; absent variables are None (never guessed)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "unix_ns": time.time_ns(),
            **{k.lower(): os.environ.get(k) for k in SEEN_ENV}}


def write(path: str, record: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def plan(blocks: list[str], out: str) -> None:
    write(out, {"blocks": blocks})


def preflight(block: str, out: str) -> None:
    write(out, {"block": block, "stage": "preflight", **seen()})


def trials(block: str, preflight_path: str, hold_s: float, out: str) -> None:
    """Hold the 'GPU' for hold_s so that overlapping blocks show up as overlapping intervals."""
    start = seen()
    time.sleep(hold_s)
    pre = json.loads(Path(preflight_path).read_text(encoding="utf-8"))
    write(out, {"block": block, "stage": "trials", "preflight": pre, "start": start, "end_unix_ns": time.time_ns()})


def compare(executions: list[str], out: str) -> None:
    write(out, {"executions": [json.loads(Path(p).read_text(encoding="utf-8")) for p in executions]})
