"""Latency-change trigger: a step slower than k x the rolling median of recent steps.

Rules (all documented thresholds):
  - no decision before `warmup_steps` steps have been seen (start-up, compilation and
    cache warm-up are slow and would always fire);
  - the median is over the last `window_steps` steps (a fixed preallocated array);
    the median, not the mean, so one slow step does not raise the bar for the next;
  - after firing, `cooldown_steps` steps pass before it can fire again (one incident,
    not a burst of snapshots of the same slowdown);
  - slow steps are still added to the window: a lasting regime change stops firing once
    it becomes the median, which is what "change" means.

This runs on every step of the workload's thread, so the median is kept incrementally: a
sorted copy of the window, updated with one bisect removal and one insertion per step
(about a microsecond for 64 values), instead of `np.median` over the window (its
partition and dispatch measured 10-65 us per call, the largest per-step cost of the
always-on recorder). The median is the same value `np.median` gives.
"""

from __future__ import annotations

import array
import bisect
from dataclasses import dataclass, field


from ..core.errors import StallcaseError
from ..core.config.numbers import TRIGGER_OPTIONS, number


# A duration no step reaches: the gate's "no step fires" (int64 max).
NEVER_NS = (1 << 63) - 1


@dataclass
class LatencyTrigger:
    k: float = 2.0
    warmup_steps: int = 20
    window_steps: int = 64
    cooldown_steps: int = 100
    fired: int = 0
    suppressed_cooldown: int = 0
    last_fire: dict | None = None
    _buf: array.array = field(default=None, repr=False)
    _n: int = 0
    _cool: int = 0
    _sorted: list = field(default=None, repr=False)

    def __post_init__(self):
        # The one check of numeric options (NaN, inf, a window that would not fit in memory);
        # a ValueError, as a constructor argument's error is in the workload's own code.
        for field_name, spec in TRIGGER_OPTIONS.values():
            try:
                number(getattr(self, field_name), f"LatencyTrigger.{field_name}", spec)
            except StallcaseError as exc:
                raise ValueError(exc.oneline()) from None
        # array.array, not numpy: an item read or store is a plain int, ~10x cheaper per step.
        self._buf = array.array("q", [0]) * self.window_steps
        self._sorted = []  # the values of _buf[:filled], sorted

    def observe(self, step_id: int, duration_ns: int) -> bool:
        """Feed one step; True when this step should trigger a snapshot."""
        n = self._n
        filled = min(n, self.window_steps)
        fire = False
        srt = self._sorted
        if n >= max(self.warmup_steps, 3) and filled >= 3:
            h = filled // 2
            med = float(srt[h]) if filled % 2 else (srt[h - 1] + srt[h]) / 2.0
            if med > 0 and duration_ns > self.k * med:
                if self._cool > 0:
                    self.suppressed_cooldown += 1
                else:
                    fire = True
                    self.fired += 1
                    self._cool = self.cooldown_steps + 1
                    self.last_fire = {"step_id": int(step_id), "duration_ns": int(duration_ns),
                                      "median_ns": int(med), "ratio": duration_ns / med, "k": self.k}
        if self._cool > 0:
            self._cool -= 1
        j = n % self.window_steps
        if filled == self.window_steps:  # the oldest value leaves the window
            del srt[bisect.bisect_left(srt, self._buf[j])]
        d = int(duration_ns)
        bisect.insort(srt, d)
        self._buf[j] = d
        self._n = n + 1
        return fire

    def gate(self, most: int) -> tuple[int, int]:
        """(max_ns, steps) for the step core's gate (step_core.py): the coming steps that
        cannot fire (nor count as suppressed by the cooldown), observed later in one go.

        Before the first decision (warm-up) no step can fire: all pass until the first that
        decides. After it, a step fires only above k x the median of the window; each step adds
        one value, which lowers any rank's value by at most one place (a value leaving the window
        never lowers one), so over the next m steps the median stays at or above the sorted
        window's value at index h - 1 - m (h = filled // 2): a duration at most k times that
        cannot fire. m is at most h // 2 (about the window's lower quartile), and `most`."""
        most = max(int(most), 1)
        n = self._n
        need = max(self.warmup_steps, 3)
        if n < need:  # steps n .. need-1 pass; step `need` is the first that decides
            return NEVER_NS, min(need - n + 1, most)
        filled = min(n, self.window_steps)
        h = filled // 2
        m = min(most - 1, h // 2)
        if m < 1 or h - 1 - m < 0:
            return -1, 1
        return int(self.k * self._sorted[h - 1 - m]), m + 1

    def describe(self) -> dict:
        return {"type": "latency_change", "k": self.k, "warmup_steps": self.warmup_steps,
                "window_steps": self.window_steps, "cooldown_steps": self.cooldown_steps,
                "fired": self.fired, "suppressed_by_cooldown": self.suppressed_cooldown,
                "last_fire": self.last_fire}
