"""Bounds: rings are preallocated and never grow; old events are overwritten and counted."""

from __future__ import annotations

import numpy as np
import pytest

from workflow_lib.capture import Budget, FlightRecorder
from workflow_lib.capture.ring import Ring, capacity_for
from workflow_lib.core.incident import read_incident

MiB = 1 << 20


def test_ten_million_spans_in_16_mib(tmp_path):
    rec = FlightRecorder(incident_id="bounds", incidents_dir=str(tmp_path), sources=("host",),
                         budget=Budget(retained_bytes=16 * MiB, window_ns=10**18))
    before = rec.retained_bytes()
    assert before <= 16 * MiB
    total, chunk = 10_000_000, 1_000_000
    tid = 4242
    for c in range(total // chunk):
        start = np.arange(c * chunk, (c + 1) * chunk, dtype=np.int64) * 10 + 1_000
        rec.host.add_spans("op", np.full(chunk, tid), start, start + 5)
    assert rec.retained_bytes() == before  # nothing grew
    cap = rec.host.spans.capacity
    copy = rec.host.spans.copy()
    assert copy.rows == cap
    assert copy.written == total and copy.overwritten == total - cap
    # The retained window is exactly the newest `cap` spans.
    expect = np.arange(total - cap, total, dtype=np.int64) * 10 + 1_000
    assert np.array_equal(copy.columns["start_ns"], expect)
    rec.start()
    path = rec.snapshot("bounds")
    rec.stop()
    inc = read_incident(path)
    detail = inc.manifest["sources"]["host"]["detail"]
    assert detail["spans_written"] == total and detail["spans_overwritten"] == total - cap
    spans = inc.table("spans")
    assert spans.num_rows == cap
    assert spans["start_ns"][0].as_py() == int(expect[0])
    assert inc.manifest["recorder"]["usage"]["retained_bytes"] <= 16 * MiB


def test_ring_overwrites_oldest_and_counts():
    r = Ring("t", {"a": "q"}, 8)
    for i in range(20):
        r.append(i)
    c = r.copy()
    assert c.columns["a"].tolist() == list(range(12, 20))
    assert c.written == 20 and c.overwritten == 12
    # Reading takes no index: counts stay exact and nothing is lost to the reader.
    r.append(20)
    c2 = r.copy()
    assert c2.written == 21 and c2.columns["a"].tolist() == list(range(13, 21))


def test_ring_extend_bigger_than_capacity_keeps_newest():
    r = Ring("t", {"a": "q", "b": "d"}, 16)
    r.append(-1, -1.0)
    r.extend(a=np.arange(100), b=np.arange(100) / 2)
    c = r.copy()
    assert c.columns["a"].tolist() == list(range(84, 100))
    assert c.columns["b"][-1] == 49.5
    assert c.written == 101


def test_capacity_is_power_of_two_within_budget():
    for b in (64 * 1024, 1_000_000, 16 * MiB):
        cap = capacity_for(b, 40)
        assert cap & (cap - 1) == 0 and cap * 40 <= b and cap * 80 > b
    with pytest.raises(ValueError):
        Ring("t", {"a": "q"}, 12)


def test_budget_shares_never_exceed_retained_bytes():
    for sources in [("host",), ("host", "nvml", "sched"), ("host", "nvml", "sched", "cupti")]:
        rec = FlightRecorder(sources=sources, budget=Budget(retained_bytes=4 * MiB))
        assert rec.retained_bytes() <= 4 * MiB
