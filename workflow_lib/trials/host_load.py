"""How busy the rest of the machine was while a trial ran.

A run's time is only as quiet as its machine: two ranks on two cores, or a program beside a
compile job, measure the scheduler as much as the change. The runner reads the machine's busy
CPU time (/proc/stat) and this process's own CPU time with its reaped children's (every process of
the run is reaped before the second reading) before and after each run; what is left is other
processes' work. A run where they used at least BUSY_SHARE of the machine carries an `unusual`
note, and the comparison says how many of its runs did (compare/build.py), so a wide floor comes
with its cause instead of looking like the program's own noise.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

BUSY_SHARE = 0.25  # of all the machine's CPUs, averaged over the run
BUSY_NOTE = "machine busy"  # how an `unusual` note of this kind starts (compare/build.py counts them)
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    wall_s: float
    machine_busy_s: float | None  # all CPUs' non-idle time; None where /proc/stat is unreadable
    own_s: float  # this process and its reaped children, user and system


def _machine_busy_s() -> float | None:
    try:
        with open("/proc/stat", "rb") as fh:
            first = fh.readline().split()
    except OSError:
        return None
    if not first or first[0] != b"cpu" or len(first) < 8:
        return None
    user, nice, system, idle, iowait, irq, softirq = (int(x) for x in first[1:8])
    steal = int(first[8]) if len(first) > 8 else 0  # guest time is inside user already
    return (user + nice + system + irq + softirq + steal) * _TICK_S


def sample() -> Sample:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return Sample(time.monotonic(), _machine_busy_s(), own)


def other_share(before: Sample, after: Sample, cpus: int | None = None) -> float | None:
    """Other processes' share of the machine's CPUs between two samples (0: idle, 1: all busy)."""
    cpus = cpus or os.cpu_count() or 1
    wall = after.wall_s - before.wall_s
    if before.machine_busy_s is None or after.machine_busy_s is None or wall <= 0:
        return None
    other = (after.machine_busy_s - before.machine_busy_s) - (after.own_s - before.own_s)
    return min(max(other / (wall * cpus), 0.0), 1.0)


def note(share: float | None, cpus: int | None = None) -> str | None:
    """The run's `unusual` note when other processes used at least BUSY_SHARE of the machine."""
    if share is None or share < BUSY_SHARE:
        return None
    cpus = cpus or os.cpu_count() or 1
    return f"{BUSY_NOTE}: other processes used {share:.0%} of its {cpus} CPUs during the run"
