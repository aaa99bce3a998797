"""What the runner observes around one run: the GPU's clocks, temperature and clock-event
reasons while it runs (GpuWatch), and the run's own capture with its diagnosis and per-step
components (diagnose_capture). The runner (runner.py) owns these; block.py never needs them.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..core import environment
from ..plan.rebuild import trial_env
from .types import Capture


class GpuWatch:
    """Samples SM clock, temperature and clock-event reasons in the runner during one run."""

    INTERVAL_S = 0.1

    def __init__(self):
        self.samples: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self.reason: str | None = None
        try:
            self.nvml = environment.import_pynvml()
            self.nvml.nvmlInit()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            index = int(visible.split(",")[0]) if visible and visible.split(",")[0].isdigit() else 0
            self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:  # NVML missing or no device: say so, never guess
            self.nvml = None
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"
        self._thread = threading.Thread(target=self._loop, daemon=True, name="stallcase-gpuwatch")

    def _loop(self) -> None:
        n = self.nvml
        getter = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        while not self._stop.is_set():
            try:
                self.samples.append((n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM),
                                     n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU),
                                     int(getter(self.handle))))
            except Exception as exc:  # a failing read ends sampling for this run; recorded below
                self.reason = f"NVML read failed: {exc}"
                return
            self._stop.wait(self.INTERVAL_S)

    def __enter__(self):
        if self.nvml is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)

    def summary(self) -> dict:
        if not self.samples:
            return {"status": "not_observed", "reason": self.reason or "no NVML sample during the run"}
        clocks = [s[0] for s in self.samples]
        reasons = 0
        for s in self.samples:
            reasons |= s[2]
        return {"status": "observed", "reason": None, "samples": len(self.samples),
                "sm_clock_mhz_min": min(clocks), "sm_clock_mhz_max": max(clocks),
                "temp_c_max": max(s[1] for s in self.samples), "clock_event_reasons_or": reasons}


def run_env(plan_env: dict, extra: dict) -> dict:
    return trial_env(plan_env, extra)  # the node's own NODE_ENV names are never taken from the plan


def spans_of(incident_dir: Path):
    """The run's spans table, or None when its incident has none (the components say so)."""
    from ..core.incident import read_incident

    inc = read_incident(incident_dir)
    return inc.table("spans") if inc.observed("host") else None


def diagnose_capture(capture_dir: Path, skip_steps: int = 0) -> Capture | None:
    """The run's own incident (if the workload snapshotted) and its diagnosis, written beside it,
    with the per-step components the comparison explains the change with (components.py)."""
    from .components import run_components
    from ..diagnose import diagnose_to_file, load_diagnosis
    from ..core.errors import StallcaseError

    found = sorted(p.parent for p in capture_dir.glob("*/manifest.json"))
    if not found:
        return None
    inc = found[-1]
    try:
        # Written as the diagnose rule writes (steps checked as they go to the tables, the record
        # validated once), then read back, verified, for the components: a third of the time of
        # validating the record with its steps inline and again without them (0.45 -> 0.15 s a run).
        diagnose_to_file(inc, inc / "diagnosis.json")
        d = load_diagnosis(inc / "diagnosis.json")
    except StallcaseError as exc:
        return Capture(incident=str(inc), diagnosis=None, error=exc.oneline())
    s = d.record["summary"]
    return Capture(incident=str(inc), diagnosis=str(inc / "diagnosis.json"), error=None,
                   explained_ns=int(s["explained_ns"]), unexplained_ns=int(s["unexplained_ns"]),
                   components=run_components(d, skip_steps, spans_of(inc)))
