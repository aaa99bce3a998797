"""The batched host_submission and cpu_contention (check_steps) give what their per-step
check() gives on incidents that reach every branch: several launching threads, scheduler
samples that do and do not bracket the gaps or the step boundaries, counters missing,
kernels without correlation ids, a clock uncertainty wide for the shortest gaps, and the
sources absent one at a time. The batched helpers they use are compared with the per-step
rules they restate."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from host_incident import bracket_tie_incident, host_incident
from test_diagnose_batch import _same
from tests import reference_diagnosis
from workflow_lib.diagnose import diagnose, measures
from workflow_lib.diagnose.batch import StepFrame
from workflow_lib.diagnose.checks import base_steps
from workflow_lib.diagnose.evidence import Sched, step_sched
from workflow_lib.diagnose.index import IntervalIndex

CASES = {
    "clock-rows": (11, {"clock": "rows"}),
    "clock-rows-2": (12, {"clock": "rows"}),
    "no-clock": (13, {"clock": "none"}),
    "kineto-timebase": (14, {"clock": "kineto"}),
    "no-runtime-api": (15, {"runtime_api": False}),
    "no-sched": (16, {"sched": False, "clock": "kineto"}),
}


def _outcomes(case: str) -> dict[str, collections.Counter]:
    """Per check: how often each verdict, and each missing string's first words, came out of the per-step path."""
    seed, kw = CASES[case]
    d = reference_diagnosis.diagnose(host_incident(seed, **kw), incident_id="x", snapshot_digest="0" * 64, validate=False)
    out = {"host_submission": collections.Counter(), "cpu_contention": collections.Counter()}
    for s in d["steps"]:
        for f in s["findings"]:
            if f["check"] in out:
                out[f["check"]][f["verdict"]] += 1
                for m in f["missing"]:
                    out[f["check"]][m] += 1
    return out


def _seen(counts: collections.Counter, prefix: str) -> int:
    return sum(v for k, v in counts.items() if k.startswith(prefix))


@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_host_checks_equal_per_step(name, monkeypatch, tmp_path):
    seed, kw = CASES[name]
    _same(host_incident(seed, **kw), monkeypatch, tmp_path)


def test_the_cases_reach_every_branch():
    """Without this the comparison above could pass on incidents where the branches never run."""
    rows = _outcomes("clock-rows")
    hs, cc = rows["host_submission"], rows["cpu_contention"]
    assert {"attributed", "unresolved", "not_applicable"} <= set(hs) and {"attributed", "unresolved", "not_applicable"} <= set(cc)
    assert _seen(hs, "correlation ids") and _seen(hs, "a host span, Python op") and _seen(hs, "clock uncertainty 4000 ns is not")
    assert _seen(cc, "scheduler counters of threads [1, 2]") and _seen(cc, "scheduler counters of threads [3, 1")  # own thread first
    assert _seen(_outcomes("no-clock")["host_submission"], "GPU->host clock uncertainty (clock_sync not observed)")
    assert _seen(_outcomes("no-runtime-api")["host_submission"], "host CUDA API calls")
    no_sched = _outcomes("no-sched")
    assert _seen(no_sched["cpu_contention"], "scheduler samples") and no_sched["host_submission"]["attributed"]


def test_samples_exactly_twice_the_gap_apart_bracket_it(monkeypatch, tmp_path):
    inc = bracket_tie_incident()
    _same(inc, monkeypatch, tmp_path)
    d = reference_diagnosis.diagnose(inc, incident_id="x", snapshot_digest="0" * 64, validate=False)
    hs = [next(f for f in s["findings"] if f["check"] == "host_submission") for s in d["steps"]]
    assert [f["verdict"] for f in hs] == ["attributed", "unresolved"]
    assert hs[0]["evidence"]["examples"][0]["host_state_basis"] == "gap"


class _Ev:
    def __init__(self, sched):
        self.sched = sched


def test_step_sched_for_all_windows_is_the_per_step_rule():
    rng = np.random.default_rng(3)
    for _ in range(300):
        m = int(rng.integers(0, 12))
        # On a 10 us grid: samples equally near a boundary, and exactly at the tolerance, happen.
        ts = np.sort(rng.integers(0, 300, m)).astype(np.int64) * 10_000
        if m > 2 and rng.random() < 0.3:
            ts[1] = ts[0]  # equal timestamps
        cpu = np.cumsum(rng.integers(0, 50_000, m)).astype(float)
        rq = np.cumsum(rng.integers(-1_000, 50_000, m)).astype(float)  # a counter that steps back
        rq[rng.random(m) < 0.1] = np.nan
        ev = _Ev({7: Sched(ts, np.array(["R"] * m), cpu, rq)})
        lo = rng.integers(-50, 300, 40).astype(np.int64) * 10_000
        hi = lo + rng.integers(0, 400, 40) * 10_000
        ok, c, w, span = base_steps.step_sched(ev, 7, lo, hi)
        for i in range(lo.size):
            ref = step_sched(ev, 7, int(lo[i]), int(hi[i]))
            got = {"cpu_ns": int(c[i]), "runqueue_wait_ns": int(w[i]), "span_ns": int(span[i])} if ok[i] else None
            assert got == ref, (ts.tolist(), int(lo[i]), int(hi[i]))
    assert not base_steps.step_sched(_Ev({}), 7, lo, hi)[0].any()


def test_covers_is_containing():
    rng = np.random.default_rng(5)
    for _ in range(200):
        s = rng.integers(0, 1_000, int(rng.integers(0, 20))).astype(np.int64)
        e = s + rng.integers(0, 60, s.size)  # some zero-length
        order = np.argsort(s, kind="stable")
        index = IntervalIndex(s[order], e[order])
        t = rng.integers(-5, 1_100, 50).astype(np.int64)
        got = base_steps.covers(s[order], e[order], t)
        assert got.tolist() == [index.containing(int(x)).size > 0 for x in t]



def test_subtract_sparse_is_subtract_cut_at_the_steps():
    rng = np.random.default_rng(9)
    for _ in range(300):
        edges = np.cumsum(rng.integers(0, 40, 2 * int(rng.integers(1, 8)))).astype(np.int64)
        frame = StepFrame(np.arange(edges.size // 2), np.zeros(edges.size // 2, np.int64), edges[0::2], edges[1::2])
        raw = rng.integers(-5, 300, (2, int(rng.integers(0, 30))))
        a = frame.pieces(measures.union(raw[0], raw[0] + rng.integers(0, 50, raw.shape[1])))
        raw = rng.integers(-5, 300, (2, int(rng.integers(0, 6))))
        b = measures.union(raw[0], raw[0] + rng.integers(0, 20, raw.shape[1]))
        got, want = frame.split(base_steps.subtract_sparse(a, b)), frame.split(measures.subtract(a, b))
        assert [x.tolist() for x in (got[0].start_ns, got[0].end_ns, got[1])] == [x.tolist() for x in (want[0].start_ns, want[0].end_ns, want[1])]
