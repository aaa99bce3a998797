"""benchmarks/recorder_overhead.py's arithmetic: the overhead of the baseline from the
comparison's off/baseline interval, and the docs rows from the H200 run's raw output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import recorder_overhead as R

FIXTURE = Path(__file__).parent / "fixtures" / "h200" / "recorder_overhead_trials_20261201.json"


def test_overhead_inverts_the_ratio_and_swaps_the_ends():
    o = R._overhead_from_ratio({"ratio": 0.8, "ratio_low": 0.5, "ratio_high": 1.0})
    assert o["pct"] == pytest.approx(25.0) and o["low_pct"] == pytest.approx(0.0) and o["high_pct"] == pytest.approx(100.0)
    assert R._overhead_from_ratio({"ratio": None, "ratio_low": None, "ratio_high": 0.0})["pct"] is None


def test_rows_judge_targets_by_the_upper_end():
    res = json.loads(FIXTURE.read_text())
    text = R.rows(res)
    span = res["span"]
    assert f"{span['span_added_ci95_ns'][1]:.0f}]" in text
    line = next(x for x in text.splitlines() if x.startswith("| span added"))
    assert line.endswith("| yes |") == (span["span_added_ci95_ns"][1] <= 300)
    tt = res["trials"]["comparisons"]["transformer_tiered"]["overhead"]
    line = next(x for x in text.splitlines() if x.startswith("| default recorder"))
    assert line.endswith("| yes |") == (tt["pct"] <= 0.5 and tt["high_pct"] <= 1.0)
    # Make the span's upper end cross the target: the row must flip to "no".
    res["span"] = dict(span, span_added_ci95_ns=[span["span_added_ci95_ns"][0], 301.0], meets_target=False)
    assert next(x for x in R.rows(res).splitlines() if x.startswith("| span added")).endswith("| no |")
