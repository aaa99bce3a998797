"""Hard budgets (never exceeded) and targets (tracked, reported, acted on by backing off).

Hard: retained bytes of all rings together, the time window a snapshot covers, and the
number of incidents being written at once (a trigger beyond it is dropped and counted,
never queued without bound), plus a bound on the per-step duration list for the trial
runner. Targets: the recorder's own CPU share (its sampler and writer threads, read from
schedstat, accounted per thread) and its memory; when over target only the costliest
thread's sampler backs off (doubling its period), and the manifest says so. The cheap
samplers the diagnosis depends on (NVML's poll; the scheduler's step-boundary marks) are
never backed off for another thread's cost.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass, field

from .clock import now_ns
from .ring import capacity_for

MiB = 1 << 20

# Share of retained_bytes per ring. Spans dominate in practice; NVML and sched are slow
# samplers; CUPTI kernel/API rings get what is left when CUPTI is on.
SHARES = {"spans": 0.40, "steps": 0.05, "sched": 0.10, "nvml": 0.05,
          "kernels": 0.20, "runtime_api": 0.15, "memcpy": 0.05}


@dataclass(frozen=True)
class Budget:
    """Limits of one recorder. Bytes are of preallocated ring storage."""

    retained_bytes: int = 64 * MiB  # all rings together; hard
    window_ns: int = 120 * 10**9  # a snapshot covers at most this much history; hard
    max_concurrent_writes: int = 1  # incidents being written at once; more triggers are dropped; hard
    max_step_durations: int = 1 << 18  # per-step durations kept for STALLCASE_STEPS_OUT; hard
    cpu_share_target: float = 0.005  # recorder threads' CPU time / wall time; target
    memory_target_bytes: int = 128 * MiB  # rings + tables being written; target
    # Scheduler sampling period. A host gap is attributed only when two samples bracket it
    # at most 2x its length apart, so 0.5 s resolves gaps of 250 ms and more; 10 ms resolves
    # 5 ms gaps at about 1% of a core for a handful of threads.
    sched_period_s: float = 0.5
    shares: dict = field(default_factory=lambda: dict(SHARES))

    def __post_init__(self):
        if self.retained_bytes < 64 * 1024:
            raise ValueError("Budget.retained_bytes must be at least 64 KiB")
        if self.sched_period_s <= 0:
            raise ValueError("Budget.sched_period_s must be positive")
        if self.window_ns <= 0 or self.max_concurrent_writes < 1 or self.max_step_durations < 1:
            raise ValueError("Budget: window_ns, max_concurrent_writes and max_step_durations must be positive")

    def capacity(self, ring: str, row_bytes: int, enabled: tuple[str, ...]) -> int:
        """Rows for `ring`: its share of retained_bytes, renormalized over enabled rings."""
        total = sum(self.shares[r] for r in enabled) or 1.0
        share = self.retained_bytes * self.shares[ring] / total
        return capacity_for(int(share), row_bytes)

    def as_dict(self) -> dict:
        return asdict(self)


def thread_cpu_ns(tid: int | None) -> int:
    if tid is None:
        return 0
    try:
        with open(f"/proc/self/task/{tid}/schedstat", "rb") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


class TargetTracker:
    """Samples the recorder threads' CPU time against wall time; asks samplers to back off."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.t0_ns = now_ns()
        self.cpu_ns = 0
        self.over_cpu_events = 0
        self.over_memory_events = 0
        self.peak_memory_bytes = 0
        self.actions: list[str] = []
        self.per_thread_cpu_ns: dict[str, int] = {}
        self._lock = threading.Lock()

    def check(self, thread_ids, memory_bytes: int, back_off) -> None:
        """CPU is accounted per recorder thread (`thread_ids`: {name: tid}, or a list);
        `back_off(costliest_name)` is called when over the CPU target, naming the thread that
        costs most, so only that one slows down; it returns a description or None."""
        named = thread_ids if isinstance(thread_ids, dict) else {str(i): t for i, t in enumerate(thread_ids)}
        per = {n: thread_cpu_ns(t) for n, t in named.items()}
        cpu = sum(per.values())
        wall = max(now_ns() - self.t0_ns, 1)
        with self._lock:
            self.cpu_ns = max(self.cpu_ns, cpu)
            for n, v in per.items():
                self.per_thread_cpu_ns[n] = max(self.per_thread_cpu_ns.get(n, 0), v)
            self.peak_memory_bytes = max(self.peak_memory_bytes, memory_bytes)
            share = cpu / wall
            # Ignore the first second: thread start-up dominates a tiny denominator.
            if wall > 10**9 and share > self.budget.cpu_share_target:
                self.over_cpu_events += 1
                costliest = max(per, key=per.get) if per else None
                what = back_off(costliest)
                if what and len(self.actions) < 50:
                    self.actions.append(f"cpu share {share:.4f} over target {self.budget.cpu_share_target}: {what}")
            if memory_bytes > self.budget.memory_target_bytes:
                self.over_memory_events += 1

    def report(self) -> dict:
        wall = max(now_ns() - self.t0_ns, 1)
        return {
            "cpu_share_target": self.budget.cpu_share_target,
            "cpu_share_sampled": self.cpu_ns / wall,
            "recorder_threads_cpu_ns": self.cpu_ns,
            "per_thread_cpu_ns": dict(self.per_thread_cpu_ns),
            "wall_ns": wall,
            "over_cpu_target_events": self.over_cpu_events,
            "memory_target_bytes": self.budget.memory_target_bytes,
            "peak_memory_bytes": self.peak_memory_bytes,
            "over_memory_target_events": self.over_memory_events,
            "actions": list(self.actions),
            "pid": os.getpid(),
        }
