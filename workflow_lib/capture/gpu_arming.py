"""GPU arming: when CUPTI activity is on (recorder.py's module doc describes the tiers), and
GPU evidence by default.

**By default, where there is a GPU.** When the program leaves `FlightRecorder(sources=...)` at
its default and this process sees a GPU and CUPTI (`gpu_present`), the recorder adds CUPTI in
its triggered tier, and CUPTI is on only in windows of whole steps:
  - **latency windows**: the trigger (the program's, else the recorder's own `LatencyTrigger()`,
    which arms and writes no snapshot of its own) arms CUPTI for `window_steps` steps after a
    slow step: the steps an incident is about;
  - **baseline windows**: `BASELINE_STEPS` steps once the trigger's warm-up has passed, then
    `BASELINE_STEPS` of every `BASELINE_EVERY_STEPS` recorded steps, and at least every
    `MAX_GAP_S` seconds: typical steps to compare them with. MAX_GAP_S is half a snapshot's
    window (Budget.window_ns, 120 s), so every snapshot holds some.
Why windows and not always on: on the H200's transformer loop CUPTI always on cost +4.5%
(kernels only) to +6% (default kinds) against the recorder's budget of 1% (docs/benchmarks.md,
"GPU evidence by default"). A window costs more than its steps' share of that: enabling and
disabling activity and the records' parsing cost ~16 ms of the training thread per 4-step
window there (measured: windows every 80 steps cost +1.54% [+0.95, +2.15]), hence one window
in 1,000 steps (every ~15 s on that loop; a 120 s snapshot holds several).
Steps count only while recording (paused steps are not recorded), so the duty cycle is over
recorded steps. `STALLCASE_GPU_EVIDENCE=off` (or mode nocupti) keeps CUPTI out.

**What a snapshot says, per step.** A step wholly inside one window had its kernels, copies
and runtime calls recorded; any other step did not. `step_coverage` writes that into the
manifest (`sources.cupti.detail.steps`), and the diagnosis applies the same rule
(`sources.cupti.covered_steps`): a step outside every window is a step whose GPU activity was
not observed, never a step with an idle GPU.

Without a GPU, or without cupti-python, nothing changes: the default sources stay host,
NVML, sched and collectives (CPU machines, CI).

With `cupti_mode="triggered"` asked by the program, the automatic snapshot of a latency change
waits for its window to close, so the incident holds the slow step and the armed steps.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from ..core import arrow

DEFAULT_SOURCES = ("host", "nvml", "sched", "collectives")
GPU_EVIDENCE_ENV = "STALLCASE_GPU_EVIDENCE"  # "off": the default stays without CUPTI
BASELINE_STEPS = 4  # whole steps in a baseline window
BASELINE_EVERY_STEPS = 1000  # one baseline window per this many recorded steps
MAX_GAP_S = 60.0  # a baseline window at least this often (half of Budget.window_ns)
FIRST_AFTER_STEPS = 20  # the first baseline window: after the trigger's default warm-up


@functools.lru_cache(maxsize=1)
def gpu_present() -> tuple[bool, str]:
    """(True, what) when cupti-python imports and NVML counts at least one GPU; else
    (False, why not). Asked once per process."""
    from .sources import cupti as cupti_source

    if cupti_source.cupti is None:
        return False, "cupti-python absent (pip install 'stallcase[gpu]')"
    try:
        import pynvml  # type: ignore

        pynvml.nvmlInit()
        try:
            n = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no driver, no libnvidia-ml: a CPU machine
        return False, f"no GPU through NVML ({type(exc).__name__}: {exc})"
    if n < 1:
        return False, "NVML counts no GPU"
    return True, f"{n} GPU(s) through NVML, cupti-python present"


def default_sources(env) -> tuple[tuple[str, ...], bool, str]:
    """(sources, GPU evidence added?, why) for a recorder whose program named no sources."""
    if (env.get(GPU_EVIDENCE_ENV) or "").strip().lower() in ("off", "0", "false", "no"):
        return DEFAULT_SOURCES, False, f"{GPU_EVIDENCE_ENV}=off"
    ok, why = gpu_present()
    return (DEFAULT_SOURCES + ("cupti",) if ok else DEFAULT_SOURCES), ok, why


class GpuArming:
    """Which steps CUPTI activity is on for. The recorder calls `step_ended` for a recorded
    step it handles and `close` when that returns True; steps the step core's gate let pass
    (step_core.py: fewer than `until_event` says) are counted in one `passed` call."""

    def __init__(self, cupti, window_steps: int, baseline_steps: int = 0):
        self.cupti = cupti
        self.window_steps = int(window_steps)
        self.left = 0  # armed steps still to record
        self.pending_auto = False  # an automatic snapshot waiting for the armed window to close
        self.kind = None  # "latency" | "baseline" while armed
        self.baseline_steps = int(baseline_steps)
        self.gap_steps = max(1, BASELINE_EVERY_STEPS - self.baseline_steps) if self.baseline_steps else 0
        self.max_gap_ns = int(MAX_GAP_S * 1e9)
        self.since = self.gap_steps - FIRST_AFTER_STEPS  # recorded steps since the last window closed
        self.due_ns = 0  # host ns by which a baseline window is due (set at the first step)
        self.armed = {"latency": 0, "baseline": 0}
        self.touched = False  # a window was armed or closed at the end of the last step

    def arm(self, steps: int | None = None, kind: str = "latency") -> bool:
        """Enable CUPTI activity for the next `steps` steps (default window_steps). A latency
        window arms over a baseline window in progress (it is longer and it is what the
        incident is about). False when CUPTI is not running or a window is already armed."""
        if self.cupti is None:
            return False
        if self.left:
            if kind != "latency" or self.kind != "baseline":
                return False
        elif not self.cupti.arm():
            return False
        # +1: the step now beginning started at the triggering step's end, before CUPTI was
        # enabled, so it is only partly covered; the window then holds `steps` whole steps.
        self.left = int(steps or self.window_steps) + 1
        self.kind = kind
        self.armed[kind] += 1
        self.touched = True
        return True

    def step_ended(self, t_ns: int = 0) -> bool:
        """Count one recorded step; True when that closed an armed window. Arms a baseline
        window when one is due."""
        self.touched = False
        if self.left:
            self.left -= 1
            return not self.left
        if self.gap_steps:
            self.since += 1
            if not self.due_ns:
                self.due_ns = t_ns + self.max_gap_ns
            if self.since >= self.gap_steps or t_ns >= self.due_ns:
                self.arm(self.baseline_steps, "baseline")
        return False

    def passed(self, n: int, t_ns: int = 0) -> None:
        """Count n recorded steps that the gate let pass (`until_event` steps fewer than it
        allowed): step_ended's count, with no window closed or armed among them."""
        self.touched = False
        if self.left:
            self.left -= n
        elif self.gap_steps:
            self.since += n
            if not self.due_ns:
                self.due_ns = t_ns + self.max_gap_ns

    def until_event(self) -> tuple[int, int]:
        """(steps, at_ns): the step, counted from the next, whose end closes or may arm a
        window, and the time from which a step's end arms a baseline window (0: none).
        (1, 0) right after a window was armed or closed: that step is handled alone."""
        if self.cupti is None:
            return 1 << 30, 0
        if self.touched:
            return 1, 0
        if self.left:
            return self.left, 0
        if self.gap_steps:
            return max(self.gap_steps - self.since, 1), self.due_ns
        return 1 << 30, 0

    def close(self, t_ns: int = 0) -> bool:
        """Disable CUPTI activity; True when an automatic snapshot was waiting for this."""
        self.left = 0
        self.kind = None
        self.since = 0
        self.touched = True
        self.due_ns = t_ns + self.max_gap_ns if t_ns else 0
        if self.cupti is not None:
            self.cupti.disarm()
            # The window's records are parsed now, between two steps, not when a buffer fills
            # later: that parse (tens of ms for a full buffer) inside some later step made it
            # slow enough to set off the latency trigger (H200: 10 latency windows in 7,500
            # steps of an A/A run with windows every 80 steps).
            self.cupti.flush()
            self.cupti.release()  # detached until the next window (sources/cupti.py: why)
        pending, self.pending_auto = self.pending_auto, False
        return pending

    def describe(self) -> dict:
        return {"windows_armed": dict(self.armed), "latency_window_steps": self.window_steps,
                "baseline": ({"steps": self.baseline_steps, "every_steps": self.gap_steps + self.baseline_steps,
                              "at_least_every_s": MAX_GAP_S, "first_after_steps": FIRST_AFTER_STEPS}
                             if self.gap_steps else None)}


def clip_windows(windows: list[list[int]], kernels: pa.Table | None, overwritten: int) -> list[list[int]]:
    """Windows whose records are still in the snapshot: when the kernel ring overwrote rows,
    windows (or their parts) before the oldest kept kernel lost records and no longer count."""
    if not overwritten or not windows:
        return windows
    if kernels is None or kernels.num_rows == 0:
        return []
    oldest = int(np.min(arrow.values(kernels["start_ns"])))
    return [[max(a, oldest), b] for a, b in windows if b > oldest]


def step_coverage(steps: pa.Table | None, windows: list[list[int]]) -> dict:
    """Per step, whether GPU activity was recorded: runs of step ids wholly inside a window
    (the rule of sources.cupti.covered_steps, which the diagnosis applies)."""
    from .sources.cupti import covered_steps

    out = {"with_gpu_activity": [], "steps_with": 0, "steps_without": 0,
           "rule": "a step has GPU activity (kernels, copies, runtime calls) recorded when it lies wholly "
                   "inside one of `windows`; other steps have none recorded"}
    if steps is None or steps.num_rows == 0:
        return out
    ids = arrow.values(steps["step_id"])
    cov = covered_steps({"sources": {"cupti": {"status": "observed", "detail": {"windows": windows}}}},
                        arrow.values(steps["start_ns"]), arrow.values(steps["end_ns"]))
    out.update(with_gpu_activity=_runs(np.unique(ids[cov])), steps_with=int(cov.sum()), steps_without=int((~cov).sum()))
    return out


def _runs(ids: np.ndarray) -> list[list[int]]:
    """Sorted unique ids as [first, last] runs of consecutive ids."""
    if ids.size == 0:
        return []
    cut = np.flatnonzero(np.diff(ids) != 1) + 1
    return [[int(r[0]), int(r[-1])] for r in np.split(ids, cut)]
