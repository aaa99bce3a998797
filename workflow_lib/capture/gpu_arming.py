"""GPU arming: the tiered CUPTI window (recorder.py's module doc describes the tiers).

With `cupti_mode="triggered"`, CUPTI activity is enabled for `window_steps` steps after the
latency trigger fires (or `rec.arm_gpu()`), and the automatic snapshot waits for the window to
close, so the incident holds the slow step and the armed steps.
"""

from __future__ import annotations


class GpuArming:
    def __init__(self, cupti, window_steps: int):
        self.cupti = cupti
        self.window_steps = int(window_steps)
        self.left = 0  # armed steps still to record
        self.pending_auto = False  # an automatic snapshot waiting for the armed window to close

    def arm(self, steps: int | None = None) -> bool:
        """Enable CUPTI activity for the next `steps` steps (default window_steps).
        False when CUPTI is not running or a window is already armed."""
        if self.cupti is None or self.left or not self.cupti.arm():
            return False
        # +1: the step now beginning started at the triggering step's end, before CUPTI was
        # enabled, so it is only partly covered; the window then holds `steps` whole steps.
        self.left = int(steps or self.window_steps) + 1
        return True

    def step_ended(self) -> bool:
        """Count one recorded step against an armed window; True when that closed it."""
        if not self.left:
            return False
        self.left -= 1
        return not self.left

    def close(self) -> bool:
        """Disable CUPTI activity; True when an automatic snapshot was waiting for this."""
        self.left = 0
        if self.cupti is not None:
            self.cupti.disarm()
        pending, self.pending_auto = self.pending_auto, False
        return pending
