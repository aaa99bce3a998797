"""The step core's gate (step_core.py): steps that `after` has nothing to do for pass it, and
the recorder handles them at its next call. Held to: the C gate and the Python one pass the
same steps; with the gate, the trigger fires on the same steps, counts the same cool-down
suppressions, and the GPU windows open and close on the same steps as when `after` sees every
step; and `after` runs on far fewer steps than are recorded (what the gate is for)."""

from __future__ import annotations

import random

import pytest

from capture_helpers import recorder
from workflow_lib.capture import LatencyTrigger, cext, step_core
from workflow_lib.capture.gpu_arming import GpuArming
from workflow_lib.capture.sources.host import HostSource
from workflow_lib.capture.steps_out import StepDurations

PATHS = ["python", pytest.param("c", marks=pytest.mark.skipif(cext.step is None, reason="C step path not built here"))]


def _core(path):
    host = HostSource(1 << 8, 1 << 6)
    errors: list[str] = []
    core = step_core.make(host, StepDurations(64), None, errors.append, path=path)
    assert step_core.path_of(core) == path
    return core, errors


@pytest.mark.parametrize("path", PATHS)
def test_the_gate_passes_steps_by_duration_count_time_and_its_cap(path):
    core, errors = _core(path)
    calls: list[tuple] = []
    gate = {"v": (100, 5, 0)}

    def after(step_id, t1, d, passed):
        calls.append((step_id, d, passed))
        core.gate(*gate["v"])

    core.after = after
    t = 1_000
    durations = [50] * 12 + [150] + [50] * 3
    for i, d in enumerate(durations):
        core.record(i, t, t + d, None, None, None, False)
        t += d + 10
    # Step 0 calls (the gate starts open); 1-4 pass, the 5th from then (5) calls; 6-9 pass,
    # 10 calls; 11 passes; 12 is over 100 ns: it calls with 11 passed; 13-15 pass (kept).
    assert [c[0] for c in calls] == [0, 5, 10, 12]
    assert calls[1][2] == (50, 50, 50, 50) and calls[3][2] == (50,) and calls[3][1] == 150
    assert core.gate_state[3] == 3
    assert core.take() == (50, 50, 50) and core.gate_state == (-1, 0, 0, 0)
    # A time limit: a step ending at or after at_ns calls.
    calls.clear()
    core.gate(10**9, 10**9, t + 3 * 60)
    for i in range(16, 22):
        core.record(i, t, t + 50, None, None, None, False)
        t += 60
    assert [c[0] for c in calls] == [19] and len(calls[0][2]) == 3  # 16-18 end before at_ns
    # The cap: at most GATE_MAX steps pass between two calls.
    calls.clear()
    gate["v"] = (10**9, 10**9, 0)
    core.gate(*gate["v"])
    for i in range(200):
        core.record(100 + i, t, t + 50, None, None, None, False)
        t += 60
    assert [len(c[2]) for c in calls] == [step_core.GATE_MAX, step_core.GATE_MAX, step_core.GATE_MAX]
    # A new `after` opens the gate and drops what passed under the old one.
    core.after = after
    assert core.gate_state == (-1, 0, 0, 0)
    assert errors == []


class _Fires(LatencyTrigger):
    """The trigger, keeping the step ids it fired on."""

    def __post_init__(self):
        super().__post_init__()
        self.ids: list = []

    def observe(self, step_id, duration_ns):
        fire = super().observe(step_id, duration_ns)
        if fire:
            self.ids.append(step_id)
        return fire


class _FakeCupti:
    """CUPTI's activity switch, at the edge this machine cannot reach (no GPU): the step each
    window was armed and closed on."""

    def __init__(self):
        self.step, self.log = None, []

    def arm(self):
        self.log.append(("arm", self.step))
        return True

    def disarm(self):
        self.log.append(("close", self.step))

    def flush(self):
        pass

    def release(self):
        pass


def _run(tmp_path, path: str, durations: list[int], gate: bool):
    trig = _Fires(k=2.0, warmup_steps=20, window_steps=64, cooldown_steps=30)
    rec = recorder(tmp_path / f"{path}-{gate}", sources=("host",), trigger=trig)
    rec.own_trigger = True  # a fire arms a window; no automatic snapshot files in this test
    rec.cupti_mode = "triggered"
    cu = _FakeCupti()
    rec.gpu = GpuArming(cu, window_steps=8, baseline_steps=4)
    rec.gpu.max_gap_ns = 200_000_000  # a baseline window at least every 0.2 s of this timeline
    rec._core = step_core.make(rec.host, rec.durations, None, rec._error, path=path)
    if not gate:
        rec._core.gate = lambda *a: None  # the reference: `after` sees every step
    rec._core_after()
    calls = []
    inner = rec._core.after
    rec._core.after = lambda *a: (calls.append(a[0]), inner(*a))
    t = 10**12
    for i, d in enumerate(durations):
        cu.step = i
        rec._end_step(i, t, t + d)
        t += d
    rec.arm_gpu(3)  # from outside, with steps still passed: they count before it
    for i in range(len(durations), len(durations) + 5):
        cu.step = i
        rec._end_step(i, t, t + 1_000_000)
        t += 1_000_000
    assert rec.errors == [] if hasattr(rec, "errors") else True
    return {"fires": trig.ids, "suppressed": trig.suppressed_cooldown, "windows": cu.log,
            "armed": dict(rec.gpu.armed), "calls": len(calls)}


def _durations(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    out = []
    base = 1_000_000
    for i in range(n):
        if i == n // 2:
            base = 1_600_000  # a lasting regime change: fires, then becomes the normal
        d = int(base * rng.uniform(0.8, 1.3))
        r = rng.random()
        if r < 0.004:
            d *= rng.choice([3, 5, 10])  # spikes the trigger fires on (or counts in cool-down)
        elif r < 0.03:
            d = int(d * rng.uniform(1.7, 2.3))  # near k x median: decided exactly either way
        out.append(d)
    return out


@pytest.mark.parametrize("path", PATHS)
def test_with_the_gate_the_trigger_and_windows_decide_as_on_every_step(tmp_path, path):
    durations = _durations(7, 3000)
    ref = _run(tmp_path, "python", durations, gate=False)
    got = _run(tmp_path, path, durations, gate=True)
    assert ref["fires"] and ref["suppressed"] and ref["armed"]["latency"] and ref["armed"]["baseline"] >= 2
    for key in ("fires", "suppressed", "windows", "armed"):
        assert got[key] == ref[key], key
    assert ref["calls"] == len(durations) + 5
    assert got["calls"] < ref["calls"] / 4, got["calls"]
