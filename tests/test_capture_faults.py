"""Faults: the recorder never raises into the host application, and says what went wrong.

NVML and CUPTI failures are in test_capture_nvml.py / test_capture_cupti.py (binding
substituted). Here: an unwritable snapshot directory (real), a full disk (the one write
binding substituted: we cannot fill a disk from a test), and a storm of triggers.
"""

from __future__ import annotations

import errno
import time

from workflow_lib.capture import Budget, LatencyTrigger
from workflow_lib.capture import writer as writer_mod
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder


def _unwritable_dir(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    probe = d / "probe"
    try:
        probe.mkdir()
    except OSError:
        return d
    # Running as root: permissions do not stop us; sysfs refuses everyone.
    probe.rmdir()
    return "/sys/fs/stallcase-incidents"


def test_unwritable_snapshot_dir_returns_none_and_is_reported(tmp_path):
    ro = _unwritable_dir(tmp_path)
    rec = recorder(tmp_path, incidents_dir=str(ro), sources=("host",))
    with rec:
        with rec.span("work"):
            pass
        assert rec.snapshot("manual") is None
        # The workload carries on; a later snapshot elsewhere reports the failure.
        rec.incidents_dir = str(tmp_path / "ok")
        path = rec.snapshot("manual")
    m = read_incident(path).manifest
    errs = m["recorder"]["errors"]
    assert any("writing snapshot" in e and ("ermission" in e or "not permitted" in e or "Read-only" in e) for e in errs), errs
    assert m["recorder"]["dropped"]["failed_snapshots"] == 1
    assert m["recorder"]["dropped"]["snapshot_write_errors"] == 1


def test_disk_full_is_contained(tmp_path, monkeypatch):
    real = writer_mod.write_incident
    calls = []

    def full(path, manifest, tables):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, manifest, tables)

    monkeypatch.setattr(writer_mod, "write_incident", full)
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        with rec.step(0):
            pass
        assert rec.snapshot("manual") is None
        path = rec.snapshot("manual")
    m = read_incident(path).manifest
    assert any("No space left on device" in e for e in m["recorder"]["errors"])


def test_steps_out_unwritable_does_not_raise(tmp_path, monkeypatch):
    monkeypatch.setenv("STALLCASE_STEPS_OUT", "/sys/fs/stallcase/steps.json")
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        with rec.step(0):
            pass
    assert any("STALLCASE_STEPS_OUT" in e for e in rec.errors)


def test_ten_thousand_triggers_a_second_are_dropped_not_queued(tmp_path):
    rec = recorder(tmp_path, sources=("host", "sched"), budget=Budget(retained_bytes=1 << 20, max_concurrent_writes=1))
    n = 10_000
    with rec:
        with rec.span("before"):
            pass
        t0 = time.perf_counter()
        got = [rec.snapshot("latency_change", wait=False, automatic=True) for _ in range(n)]
        elapsed = time.perf_counter() - t0
    written = [p for p in got if p is not None]
    # Far faster than writing: the host pays a reservation check per trigger, not a write.
    assert elapsed < 1.0, elapsed
    assert 1 <= len(written) < 50
    assert rec.dropped_snapshots == n - len(written)
    for p in written:
        m = read_incident(p).manifest
        assert m["reason"] == "latency_change" and p.name.startswith("t.latency_change-")
    last = read_incident(written[-1]).manifest["recorder"]["dropped"]["snapshots"]
    assert last >= 0
    assert any("dropped" in u for u in rec.unusual_events())


def test_latency_trigger_storm_through_steps(tmp_path):
    # Every other step is 'slow' and the cool-down is zero: the trigger fires constantly,
    # the concurrent-write budget drops the excess, the loop never sees an exception.
    trig = LatencyTrigger(k=1.5, warmup_steps=4, window_steps=8, cooldown_steps=0)
    rec = recorder(tmp_path, sources=("host",), trigger=trig)
    with rec:
        for i in range(2000):
            with rec.step(i):
                if i % 2:
                    t = time.perf_counter_ns() + 200_000
                    while time.perf_counter_ns() < t:
                        pass
    assert trig.fired > 100
    assert rec.auto_snapshots == trig.fired
    assert rec.dropped_snapshots > 0
    assert rec.dropped_snapshots + rec.writer.written + rec.failed_snapshots == trig.fired
    snaps = sorted((tmp_path / "incidents").iterdir())
    assert len(snaps) == rec.writer.written
    m = read_incident(snaps[0]).manifest
    assert m["trigger"]["type"] == "latency_change" and m["trigger"]["last_fire"]["ratio"] > 1.5
