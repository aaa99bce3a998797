"""What one step-boundary mark costs on this machine: the syscalls the recorder's step path makes.

    python3 examples/gpu/syscall_cost.py [--n 20000]

Why: the default recorder's per-step cost on the lent H200 (+146 to +199 us of training-thread CPU
per step, docs/benchmarks.md) is 10-20x what the same step path costs on the CPU development
machine. The lent machines run under one of two runtimes (Firecracker or gVisor, KINDS.md); under
gVisor a syscall, and most of all a read of /proc, is served by a user-space kernel. This prints
the kernel release (4.4.0 is gVisor's) and the median ns per call of each piece of the step path:
a clock read, the scheduler mark's pread of /proc/thread-self/schedstat, a pread of another
thread's schedstat, and thread CPU time, each timed over --n calls in blocks (thread CPU and wall).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time


def per_call(fn, n: int, blocks: int = 11) -> dict:
    """Median over blocks of (wall ns per call, thread-CPU ns per call)."""
    walls, cpus = [], []
    per = max(1, n // blocks)
    for _ in range(blocks):
        c, w = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(per):
            fn()
        walls.append((time.perf_counter_ns() - w) / per)
        cpus.append((time.thread_time_ns() - c) / per)
    return {"wall_ns": round(statistics.median(walls), 1), "thread_cpu_ns": round(statistics.median(cpus), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    own = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    peer = os.open(f"/proc/self/task/{other.native_id}/schedstat", os.O_RDONLY)
    out = {"kernel_release": platform.release(), "cpus": os.cpu_count(), "n": a.n, "calls": {
        "perf_counter_ns": per_call(time.perf_counter_ns, a.n),
        "monotonic_ns": per_call(time.monotonic_ns, a.n),
        "thread_time_ns": per_call(time.thread_time_ns, a.n),
        "pread_own_schedstat": per_call(lambda: os.pread(own, 128, 0), a.n),
        "pread_peer_schedstat": per_call(lambda: os.pread(peer, 128, 0), a.n),
        "getpid": per_call(os.getpid, a.n),
    }}
    stop.set()
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
