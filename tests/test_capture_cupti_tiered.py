"""Two-tier GPU activity on CPU: CUPTI armed by the latency trigger for the next N steps,
the automatic snapshot written when that window closes, the armed interval in the manifest,
and the helper the diagnosis uses to tell steps with and without GPU activity apart.
The binding is the fake of test_capture_cupti; everything else is the real recorder."""

from __future__ import annotations

import time

import numpy as np
import pytest

from workflow_lib.capture import FlightRecorder, LatencyTrigger
from workflow_lib.capture.sources import cupti as cupti_mod
from workflow_lib.core.incident import read_incident

from test_capture_cupti import CUPTI_BASE_NS, ActivityKind, FakeCupti, _records


def _run(tmp_path, monkeypatch, mode_env=None, steps=40, slow=25, window=5):
    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    if mode_env is not None:
        monkeypatch.setenv("STALLCASE_RECORDER_MODE", mode_env)
    rec = FlightRecorder(incident_id="tier", incidents_dir=str(tmp_path), sources=("host", "cupti"),
                         trigger=LatencyTrigger(k=40.0, warmup_steps=10, cooldown_steps=100),
                         cupti_mode="triggered", gpu_window_steps=window, gpu_baseline_steps=0)
    enabled_at = {}
    with rec:
        for i in range(steps):
            with rec.step(i):
                time.sleep(0.4 if i == slow else 0.002)  # 200x: far beyond k even on a loaded host
                if fake.enabled:
                    enabled_at[i] = True
                    fake.completed(_records(time.monotonic_ns() + CUPTI_BASE_NS))
    return rec, fake, enabled_at


def test_trigger_arms_cupti_for_the_next_steps_and_snapshots_after(tmp_path, monkeypatch):
    rec, fake, enabled_at = _run(tmp_path, monkeypatch)
    # Armed after the slow step: step 26 (whose iteration began at step 25's end, before CUPTI
    # was enabled, so it is covered only in part) and then 5 whole steps.
    assert sorted(enabled_at) == [26, 27, 28, 29, 30, 31]
    assert fake.enabled == []
    snaps = sorted(tmp_path.glob("tier.latency_change-*"))
    assert len(snaps) == 1
    inc = read_incident(snaps[0])
    cu = inc.manifest["sources"]["cupti"]
    assert cu["status"] == "observed" and cu["detail"]["mode"] == "triggered"
    wins = cu["detail"]["windows"]
    assert len(wins) == 1 and wins[0][0] < wins[0][1]
    steps = inc.table("steps").to_pandas().sort_values("step_id")
    covered = cupti_mod.covered_steps(inc.manifest, steps["start_ns"], steps["end_ns"])
    # The armed window opens just after the end of step 25 and closes at the end of step 31.
    assert list(steps["step_id"][covered]) == [27, 28, 29, 30, 31]
    k = inc.table("kernels").to_pandas()
    assert len(k) == 24 and ((k["start_ns"] >= wins[0][0] - 2_000_000) & (k["end_ns"] <= wins[0][1] + 2_000_000)).all()
    assert inc.manifest["recorder"]["mode"]["cupti_mode"] == "triggered"


def test_no_trigger_no_gpu_activity_and_helper_says_not_observed(tmp_path, monkeypatch):
    rec, fake, enabled_at = _run(tmp_path, monkeypatch, slow=-1)
    assert enabled_at == {}
    with rec:
        pass
    m = {"sources": {"cupti": rec.cupti.manifest_entry(rec.cupti.copies(), 0, time.monotonic_ns())}}
    assert m["sources"]["cupti"]["detail"]["windows"] == []
    assert not cupti_mod.covered_steps(m, [1, 2], [3, 4]).any()
    assert cupti_mod.activity_windows({"sources": {}}) is None


def test_mode_env_cupti_keeps_it_always_on_and_off_disables(tmp_path, monkeypatch):
    rec, fake, enabled_at = _run(tmp_path, monkeypatch, mode_env="cupti", steps=12)
    assert sorted(enabled_at) == list(range(12)) and rec.cupti_mode == "always"
    rec, fake, enabled_at = _run(tmp_path, monkeypatch, mode_env="off", steps=12)
    assert not rec.enabled and enabled_at == {}
    rec, fake, enabled_at = _run(tmp_path, monkeypatch, mode_env="nocupti", steps=12)
    assert rec.cupti is None
    monkeypatch.setenv("STALLCASE_RECORDER_MODE", "bogus")
    with pytest.raises(ValueError, match="STALLCASE_RECORDER_MODE"):
        FlightRecorder(incidents_dir=str(tmp_path))


def test_old_manifest_without_windows_counts_as_always_on():
    m = {"window": {"start_ns": 10, "end_ns": 100}, "sources": {"cupti": {"status": "observed", "detail": {}}}}
    assert list(cupti_mod.covered_steps(m, np.array([10, 90]), np.array([20, 110]))) == [True, False]


def test_run_ending_inside_an_armed_window_still_writes_it(tmp_path, monkeypatch):
    rec, fake, enabled_at = _run(tmp_path, monkeypatch, steps=28, slow=25, window=10)
    assert sorted(enabled_at) == [26, 27]
    snaps = sorted(tmp_path.glob("tier.latency_change-*"))
    assert len(snaps) == 1 and fake.enabled == []


@pytest.mark.parametrize("detach", ["on", "off"])
def test_cupti_is_detached_between_windows_and_the_window_kept(tmp_path, monkeypatch, detach):
    """Attached and idle, CUPTI cost the unchanged H200 loop +25-40% per step (docs/benchmarks.md,
    round 5): between windows the triggered tier detaches it (cuptiFinalize) after the window's
    flush, and the next arm registers again; the window's records and status stay as they were."""
    calls = []
    monkeypatch.setattr(FakeCupti, "finalize", lambda self: calls.append(len(self.enabled)), raising=False)
    monkeypatch.setenv("STALLCASE_CUPTI_DETACH", detach)
    rec, fake, enabled_at = _run(tmp_path, monkeypatch)
    assert sorted(enabled_at) == [26, 27, 28, 29, 30, 31]
    assert calls == ([0] if detach == "on" else [])  # once, after the window, with nothing enabled
    inc = read_incident(sorted(tmp_path.glob("tier.latency_change-*"))[0])
    cu = inc.manifest["sources"]["cupti"]
    assert cu["status"] == "observed" and cu["detail"]["detached_between_windows"] == len(calls)
    assert inc.table("kernels").num_rows == 24


def test_cupti_left_attached_while_the_programs_torch_profiler_runs(tmp_path, monkeypatch):
    """Kineto (the program's own torch.profiler) shares CUPTI: no detach under it."""
    calls = []
    monkeypatch.setattr(FakeCupti, "finalize", lambda self: calls.append(1), raising=False)
    monkeypatch.setattr(cupti_mod, "_torch_profiler_on", lambda: True)
    rec, fake, enabled_at = _run(tmp_path, monkeypatch)
    assert sorted(enabled_at) == [26, 27, 28, 29, 30, 31] and calls == []
