"""The per-step durations a recorder keeps for the trial runner, and the steps-out file it
writes at stop (the record type is types.py `StepsOut`, schemas/steps_out.schema.json).

Preallocated and bounded (Budget.max_step_durations): a long run keeps its first N steps and
says how many it dropped.
"""

from __future__ import annotations

import array
import itertools
import json
import os

import numpy as np

from ..core import atomic
from .ring import peek
from .types import StepsOut

STEPS_OUT_ENV = "STALLCASE_STEPS_OUT"
# A directory: each process of a multi-process run writes its own steps-out file there
# (steps_out_name), so the trial runner reads every rank and role of the job.
STEPS_OUT_DIR_ENV = "STALLCASE_STEPS_OUT_DIR"


def steps_out_name(rank: int | None, pid: int) -> str:
    """One process's file in STALLCASE_STEPS_OUT_DIR (metric.py reads them all)."""
    return f"steps-rank{rank}-{pid}.json" if rank is not None else f"steps-pid{pid}.json"


class StepDurations:
    """Durations, items and tokens of the first `capacity` steps (-1: work not declared)."""

    def __init__(self, capacity: int):
        self.durations = array.array("q", [0]) * capacity
        self.items = array.array("q", [-1]) * capacity
        self.tokens = array.array("q", [-1]) * capacity
        # Writers take k = next(ctr) (the C step path too, step_core.py); `seen` peeks at it.
        self.ctr = itertools.count()

    def __len__(self) -> int:
        return len(self.durations)

    def add(self, duration_ns: int, items: int, tokens: int) -> None:
        k = next(self.ctr)
        if k < len(self.durations):
            self.durations[k] = duration_ns
            self.items[k] = items
            self.tokens[k] = tokens

    @property
    def seen(self) -> int:
        """Steps added (the counter's next index, ring.peek)."""
        return peek(self.ctr)

    @property
    def kept(self) -> int:
        return min(self.seen, len(self.durations))

    @property
    def dropped(self) -> int:
        return max(0, self.seen - len(self.durations))

    def record(self, unusual: list[str], rank: int | None, role: str | None) -> StepsOut:
        """The STALLCASE_STEPS_OUT record."""
        n = self.kept

        def work(arr) -> list | None:
            vals = np.frombuffer(arr, dtype=np.int64)[:n]
            if not n or not (vals >= 0).any():
                return None
            return [int(v) if v >= 0 else None for v in vals]

        return StepsOut(covers="iteration", steps_ns=np.frombuffer(self.durations, dtype=np.int64)[:n].tolist(),
                        items=work(self.items), tokens=work(self.tokens), unusual=unusual,
                        rank=rank, role=role, pid=os.getpid())


def destination(rank: int | None) -> str | None:
    """Where this process's steps-out file goes (None: the environment asks for none)."""
    out_dir = os.environ.get(STEPS_OUT_DIR_ENV)
    return os.path.join(out_dir, steps_out_name(rank, os.getpid())) if out_dir else os.environ.get(STEPS_OUT_ENV)


def write(dest: str, record: StepsOut) -> None:
    """Validate and write atomically; raises OSError or the validation error (the recorder
    catches both: it must not raise into the workload)."""
    from ..core import records

    rec = record.to_json()
    records.validate(rec, "steps_out", where=f"{STEPS_OUT_ENV}={dest}")
    atomic.write_text(dest, json.dumps(rec, separators=(",", ":")) + "\n")
