"""benchmarks/diagnose_speed.py judges the json.loads ratio pair by pair: the interval printed is
over per-pair ratios, and its upper end decides the target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.diagnose_speed import pair_ratios, ratio_interval

ROOT = Path(__file__).resolve().parent.parent


def test_interval_is_over_pair_ratios_not_a_ratio_of_medians():
    refs = [{"seconds": s} for s in (1.0, 2.0, 4.0)]
    ours = [{"seconds": s} for s in (1.4, 2.2, 8.0)]  # medians 2.0 / 2.2 = 1.1; the third pair is 2.0x
    pairs = pair_ratios(refs, ours)
    assert pairs == pytest.approx([1.4, 1.1, 2.0])
    med, lo, hi, cover = ratio_interval(pairs)
    assert (med, lo, hi) == pytest.approx((1.4, 1.1, 2.0))
    assert cover == pytest.approx(0.75)


@pytest.mark.parametrize("n, cover", [(1, 0.0), (2, 0.5), (5, 0.9375), (10, 1 - 2 / 1024)])
def test_coverage_of_min_max_for_the_median(n, cover):
    assert ratio_interval([1.0 + i for i in range(n)])[3] == pytest.approx(cover)


def test_unpaired_runs_are_refused():
    with pytest.raises(ValueError, match="not pairs"):
        pair_ratios([{"seconds": 1.0}], [{"seconds": 1.0}, {"seconds": 2.0}])
    with pytest.raises(ValueError, match="no pairs"):
        ratio_interval([])


def test_small_run_prints_the_judged_interval(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/diagnose_speed.py"), "--events", "3000", "--steps", "0",
                           "--repeats", "2", "--hta-repeats", "0", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert out.count("  pair ") == 2 and "load average at start" in out
    line = next(l for l in out.splitlines() if l.startswith("time vs bare json.loads"))
    (run,) = json.loads((tmp_path / "results.json").read_text())["events"].values()
    r = run["results"]["stallcase"]
    pairs = [b["seconds"] / a["seconds"] for a, b in zip(run["results"]["json_loads"]["runs"], r["runs"])]
    assert r["json_loads_ratio_pairs"] == pytest.approx(pairs) and len(r["pair_load_1min"]) == 2
    assert r["json_loads_ratio"]["max"] == max(pairs)
    assert f"[{min(pairs):.2f}, {max(pairs):.2f}]" in line
    assert f"upper end: {'met' if max(pairs) <= 1.5 else 'NOT met'})" in line
