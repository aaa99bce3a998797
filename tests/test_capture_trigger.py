"""Latency trigger: warm-up, k x rolling median, cool-down, regime change."""

from __future__ import annotations

import pytest

from workflow_lib.capture import LatencyTrigger
from workflow_lib.core.incident import read_incident

from capture_helpers import busy_ms, recorder


def feed(trig, durations):
    return [i for i, d in enumerate(durations) if trig.observe(i, d)]


def test_no_fire_during_warmup():
    t = LatencyTrigger(k=2, warmup_steps=10, window_steps=8, cooldown_steps=0)
    assert feed(t, [100] * 5 + [1000] * 3 + [100] * 2) == []


def test_fires_on_slow_step_after_warmup():
    t = LatencyTrigger(k=2, warmup_steps=10, window_steps=8, cooldown_steps=5)
    d = [100] * 20
    d[15] = 201
    d[12] = 199  # below k x median: no fire
    assert feed(t, d) == [15]
    assert t.last_fire["step_id"] == 15 and t.last_fire["median_ns"] == 100


def test_cooldown_suppresses_and_counts():
    t = LatencyTrigger(k=2, warmup_steps=3, window_steps=16, cooldown_steps=3)
    d = [100] * 10 + [500, 500, 100, 500, 100, 100, 500]
    # fires at 10; 11 and 13 suppressed (cool-down 3 steps); 16 fires again
    assert feed(t, d) == [10, 16]
    assert t.suppressed_cooldown == 2


def test_lasting_regime_change_stops_firing():
    t = LatencyTrigger(k=2, warmup_steps=3, window_steps=5, cooldown_steps=0)
    fired = feed(t, [100] * 10 + [300] * 20)
    assert fired == [10, 11, 12]  # once 300 is the median it is the new normal


def test_bad_parameters_refused():
    with pytest.raises(ValueError):
        LatencyTrigger(k=1.0)
    with pytest.raises(ValueError):
        LatencyTrigger(window_steps=2)


def test_trigger_snapshots_automatically_with_suffix(tmp_path):
    # Wide margins (k=8, a 100 ms step among 2 ms ones): this box is shared and noisy.
    trig = LatencyTrigger(k=8, warmup_steps=5, window_steps=8, cooldown_steps=50)
    rec = recorder(tmp_path, sources=("host",), trigger=trig)
    with rec:
        for i in range(15):
            with rec.step(i):
                busy_ms(100 if i == 10 else 2)
    assert trig.fired == 1
    snaps = list((tmp_path / "incidents").iterdir())
    assert [p.name for p in snaps] == ["t.latency_change-1"]
    m = read_incident(snaps[0]).manifest
    assert m["reason"] == "latency_change" and m["trigger"]["last_fire"]["step_id"] == 10
    steps = read_incident(snaps[0]).table("steps").to_pandas()
    assert steps["step_id"].max() == 10  # the slow step is inside its own snapshot


def test_incremental_median_decides_as_np_median_would():
    """The trigger keeps its median incrementally; every decision must equal the one a
    np.median over the same window gives (random durations with ties, several windows)."""
    import numpy as np

    rng = np.random.default_rng(7)
    for w in (3, 4, 7, 64):
        vals = rng.integers(1, 60, 1500)
        t = LatencyTrigger(k=1.5, warmup_steps=5, window_steps=w, cooldown_steps=3)
        got = [t.observe(i, int(v)) for i, v in enumerate(vals)]
        ref, buf, cool = [], np.zeros(w, np.int64), 0
        for n, v in enumerate(vals):
            filled, fire = min(n, w), False
            if n >= 5 and filled >= 3:
                med = float(np.median(buf[:filled]))
                if med > 0 and v > 1.5 * med and cool == 0:
                    fire, cool = True, 4
            if cool > 0:
                cool -= 1
            buf[n % w] = v
            ref.append(fire)
        assert got == ref and any(got), w
