"""Where a finding sits on its step's timeline (findings[].at, diagnosis version 4).

A check whose cause is host time of its own names where that time was: an input starvation
sits on the step's declared wait spans (evidence.wait_union), a sync stall on its synchronizing
calls (evidence.sync_union: the is_sync flag or a synchronizing name, vocabulary.is_sync_call),
each clipped to the step. The diagnosis records it when it makes the finding, so the report
draws the finding there without working it out again from the incident (report/timeline.py).
Every other finding's `at` is null: its record says how much of the step it explains, not one
place of its own (the report draws it as a share of its step).

    Placed.of_rank(parts, n, origin) -> Placed       # all steps of a rank (columns.py)
    Placed.of(k) -> [{start_ns, end_ns}] | None      # step k's finding, as the record holds it

The per-step reference of the same places is tests/reference_diagnosis (at_of_step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .types import Intervals

PLACED = {"input_starvation": "wait_union", "sync_stall": "sync_union"}
"""check -> the rank evidence's union (evidence.RankEvidence) its attributed findings sit on."""

_I64 = np.int64


def union_of(check: str, ev) -> Intervals:
    return getattr(ev, PLACED[check])


@dataclass(frozen=True)
class Placed:
    """One check's places for every step of a rank, flat: step k's pieces are rows
    offsets[k]:offsets[k+1], in time order, on the absolute timeline."""

    offsets: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    @staticmethod
    def of_rank(parts: list[tuple[Intervals, np.ndarray]], n: int, origin: int) -> "Placed":
        """From (pieces, their step row) parts (relative ns, each piece inside its step)."""
        none = np.zeros(0, _I64)
        s = np.concatenate([none] + [p.start_ns for p, _ in parts])
        e = np.concatenate([none] + [p.end_ns for p, _ in parts])
        k = np.concatenate([none] + [np.asarray(r, _I64) for _, r in parts])
        order = np.lexsort((s, k))
        counts = np.bincount(k, minlength=n)[:n] if k.size else np.zeros(n, _I64)
        return Placed(np.concatenate([[0], np.cumsum(counts)]).astype(_I64), s[order] + origin, e[order] + origin)

    def of(self, k: int) -> list[dict] | None:
        a, b = int(self.offsets[k]), int(self.offsets[k + 1])
        if a == b:
            return None
        return [{"start_ns": int(s), "end_ns": int(e)} for s, e in zip(self.start_ns[a:b].tolist(), self.end_ns[a:b].tolist())]
