"""GPU evidence by default (capture/gpu_arming.py), on CPU: the fake CUPTI binding of
test_capture_cupti stands in for the GPU; the recorder, the snapshot and the diagnosis are real.

Where a GPU and CUPTI are present, `FlightRecorder()` with no sources named adds CUPTI armed in
windows (baseline windows of typical steps, and the recorder's own latency trigger), writes per
step which steps have GPU activity, and the diagnosis reads a step outside every window as a
step whose GPU activity was not observed. Without a GPU nothing changes."""

from __future__ import annotations

import time

import pytest

from workflow_lib.capture import FlightRecorder, LatencyTrigger, gpu_arming
from workflow_lib.capture.sources import cupti as cupti_mod
from workflow_lib.core.incident import read_incident
from workflow_lib.diagnose import diagnose_dir

from test_capture_cupti import CUPTI_BASE_NS, FakeCupti, _records


class FlushingCupti(FakeCupti):
    """Holds a window's records until CUPTI is flushed (the recorder flushes as a window closes)."""

    def __init__(self):
        super().__init__()
        self.pending = []

    def activity_flush_all(self, flag):
        super().activity_flush_all(flag)
        recs, self.pending = self.pending, []
        if recs and self.completed is not None:
            self.completed(recs)


@pytest.fixture
def fake_gpu(monkeypatch):
    fake = FlushingCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    monkeypatch.setattr(gpu_arming, "gpu_present", lambda: (True, "fake GPU for the test"))
    monkeypatch.delenv(gpu_arming.GPU_EVIDENCE_ENV, raising=False)
    monkeypatch.delenv("STALLCASE_RECORDER_MODE", raising=False)
    return fake


def _loop(rec, fake, steps: int, slow: int = -1, sleep_s: float = 0.002) -> list[int]:
    """`steps` steps of ~`sleep_s`; while CUPTI is enabled each step launches "kernels"."""
    enabled_at = []
    with rec:
        for i in range(steps):
            with rec.step(i):
                time.sleep(0.3 if i == slow else sleep_s)
                if fake.enabled:
                    enabled_at.append(i)
                    fake.pending += _records(time.monotonic_ns() + CUPTI_BASE_NS)
        path = rec.snapshot("workload_boundary")
    return enabled_at, path


def test_without_a_gpu_the_default_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_arming, "gpu_present", lambda: (False, "NVML counts no GPU"))
    rec = FlightRecorder(incident_id="cpu", incidents_dir=str(tmp_path))
    assert rec.requested == gpu_arming.DEFAULT_SOURCES and rec.cupti is None and rec.trigger is None
    assert rec.report()["gpu_evidence"]["default"] == {"cupti_added": False, "why": "NVML counts no GPU"}


def test_env_off_keeps_cupti_out(tmp_path, fake_gpu, monkeypatch):
    monkeypatch.setenv(gpu_arming.GPU_EVIDENCE_ENV, "off")
    rec = FlightRecorder(incident_id="off", incidents_dir=str(tmp_path))
    assert rec.cupti is None and rec.requested == gpu_arming.DEFAULT_SOURCES


def test_default_arms_baseline_windows_and_says_which_steps_have_gpu_activity(tmp_path, fake_gpu):
    rec = FlightRecorder(incident_id="gpu", incidents_dir=str(tmp_path))
    assert "cupti" in rec.requested and rec.cupti_mode == "triggered" and rec.own_trigger
    assert rec.trigger is not None and rec.trigger.k == LatencyTrigger().k
    # A loaded test host varies 2 ms sleeps by more than 2x: the baseline windows alone here.
    rec.trigger = LatencyTrigger(k=1000.0)
    enabled_at, path = _loop(rec, fake_gpu, 1040, sleep_s=0.0002)
    # A baseline window armed at the end of step 19 (4 steps, +1: see GpuArming.arm), the next
    # 996 recorded steps after it closed (4 steps of every 1,000).
    assert enabled_at == [20, 21, 22, 23, 24, 1021, 1022, 1023, 1024, 1025]
    inc = read_incident(path)
    cu = inc.manifest["sources"]["cupti"]
    assert cu["status"] == "observed"
    # The first step of a window is whole inside it only when it began after the arming (the
    # scheduler's step mark moves a step's start past the previous step's end).
    cov = cu["detail"]["steps"]
    assert cov["with_gpu_activity"] in ([[20, 24], [1021, 1025]], [[21, 24], [1022, 1025]])
    assert cov["steps_with"] + cov["steps_without"] == 1040 and cov["steps_with"] in (8, 10)
    ge = inc.manifest["recorder"]["gpu_evidence"]
    assert ge["windows_armed"] == {"latency": 0, "baseline": 2} and ge["own_trigger"]
    # No second incident: the recorder's own trigger arms, it never snapshots.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu"]

    d = diagnose_dir(path)
    by_id = {s["step_id"]: s for s in d["steps"]}
    for i in (22, 23, 1023):
        assert by_id[i]["kernel_sum_ns"] is not None and by_id[i]["busy_ns"] is not None
    for i in (5, 40, 500, 1030):
        s = by_id[i]
        assert s["kernel_sum_ns"] is None and s["busy_ns"] is None and s["host_api_ns"] is None
        missing = {m for f in s["findings"] for m in f["missing"]}
        assert any("kernels not observed" in m for m in missing), missing


def test_own_trigger_arms_a_latency_window_after_a_slow_step(tmp_path, fake_gpu):
    rec = FlightRecorder(incident_id="slow", incidents_dir=str(tmp_path), gpu_window_steps=8)
    rec.trigger = LatencyTrigger(k=40.0)  # the 150x step only, on a loaded host
    enabled_at, path = _loop(rec, fake_gpu, 60, slow=40)
    assert list(range(41, 50)) == [i for i in enabled_at if i > 40]
    assert rec.trigger.fired == 1 and rec.auto_snapshots == 0
    cov = read_incident(path).manifest["sources"]["cupti"]["detail"]["steps"]["with_gpu_activity"]
    assert [41, 49] in cov or [42, 49] in cov
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow"]


def test_a_programs_trigger_still_snapshots_and_its_window_overrides_a_baseline(tmp_path, fake_gpu):
    trig = LatencyTrigger(k=20.0, warmup_steps=10, cooldown_steps=100)
    rec = FlightRecorder(incident_id="prog", incidents_dir=str(tmp_path), trigger=trig, gpu_window_steps=6)
    enabled_at, _ = _loop(rec, fake_gpu, 40, slow=21)  # the slow step falls in the first baseline window
    assert not rec.own_trigger and rec.auto_snapshots == 1
    assert [i for i in enabled_at if i > 21] == list(range(22, 29))
    assert any(p.name.startswith("prog.latency_change-") for p in tmp_path.iterdir())


def test_window_clipping_and_step_runs():
    import pyarrow as pa

    k = pa.table({"start_ns": pa.array([150, 170], pa.int64())})
    assert gpu_arming.clip_windows([[0, 100], [120, 200]], k, overwritten=5) == [[150, 200]]
    assert gpu_arming.clip_windows([[0, 100]], k, overwritten=0) == [[0, 100]]
    steps = pa.table({"step_id": pa.array([1, 2, 3, 7], pa.int64()), "start_ns": pa.array([10, 20, 30, 70], pa.int64()),
                      "end_ns": pa.array([19, 29, 39, 79], pa.int64())})
    cov = gpu_arming.step_coverage(steps, [[10, 30], [60, 80]])
    assert cov["with_gpu_activity"] == [[1, 2], [7, 7]] and cov["steps_without"] == 1


def test_cupti_is_set_up_at_start_and_leaves_no_window(tmp_path, fake_gpu):
    rec = FlightRecorder(incident_id="prep", incidents_dir=str(tmp_path))
    rec.start()
    try:
        # Registered (callbacks in) and activity enabled-disabled once: nothing left on, no window.
        assert fake_gpu.completed is not None and fake_gpu.enabled == []
        assert rec.cupti.windows == [] and not rec.cupti.armed
    finally:
        rec.stop()


def test_the_step_after_a_window_closes_is_not_fed_to_the_trigger(tmp_path, fake_gpu):
    """A window's close flushes and parses its records; where a step's start is not moved past
    that (steps from optimizer hooks), the next step carries it and must not look like a
    latency change. A slow step right after the first baseline window (steps 20-24) is skipped;
    the same slow step later fires."""
    rec = FlightRecorder(incident_id="quiet", incidents_dir=str(tmp_path), gpu_window_steps=4)
    rec.trigger = LatencyTrigger(k=40.0, cooldown_steps=0)
    with rec:
        for i in range(60):
            with rec.step(i):
                time.sleep(0.3 if i in (25, 45) else 0.002)
    assert rec.trigger.fired == 1 and rec.trigger.last_fire["step_id"] == 45
