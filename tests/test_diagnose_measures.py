"""Measures on synthetic timelines with known answers; interval algebra against a brute force."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import kernel, make_incident, memcpy, step, api
from workflow_lib.diagnose import DiagnoseOptions, diagnose, measures

DIGEST = "0" * 64


def run(inc, **opts):
    return diagnose(inc, incident_id="t", snapshot_digest=DIGEST, options=DiagnoseOptions(**opts))


def test_overlapping_kernels_on_two_streams_sum_vs_busy():
    # stream 7: [0,600) ; stream 8: [400,900) ; memcpy [950,1000); step [0,1000)
    inc = make_incident(steps=[step(0, 0, 1000)],
                        kernels=[kernel(0, 600, stream=7), kernel(400, 900, stream=8)],
                        memcpy=[memcpy(950, 1000)])
    s = run(inc)["steps"][0]
    assert s["wall_ns"] == 1000
    assert s["kernel_sum_ns"] == 1100
    assert s["busy_ns"] == 950
    assert s["idle_ns"] == 50
    assert s["gaps"]["count"] == 1 and s["gaps"]["longest"][0] == {"start_ns": 900, "end_ns": 950, "length_ns": 50}
    assert s["overlap_factor"] == round(1100 / 950, 6)


def test_kernels_are_clipped_to_their_step():
    inc = make_incident(steps=[step(0, 0, 1000), step(1, 1000, 2000)], kernels=[kernel(800, 1300)])
    a, b = run(inc)["steps"]
    assert (a["kernel_sum_ns"], a["busy_ns"]) == (200, 200)
    assert (b["kernel_sum_ns"], b["busy_ns"]) == (300, 300)


def test_host_api_time_all_and_sync():
    inc = make_incident(steps=[step(0, 0, 1000)], kernels=[kernel(0, 1000)],
                        runtime_api=[api(0, 100), api(50, 150), api(500, 800, name="cudaStreamSynchronize", is_sync=True)])
    s = run(inc)["steps"][0]
    assert s["host_api_ns"] == 450
    assert s["host_sync_api_ns"] == 300


def test_unobserved_sources_give_null_measures():
    inc = make_incident(steps=[step(0, 0, 1000)])
    s = run(inc)["steps"][0]
    assert s["kernel_sum_ns"] is None and s["busy_ns"] is None and s["host_api_ns"] is None


def _brute(starts, ends, lo, hi):
    cover = np.zeros(hi - lo, bool)
    total = 0
    for s, e in zip(starts, ends):
        a, b = max(s, lo), min(e, hi)
        if b > a:
            cover[a - lo:b - lo] = True
            total += b - a
    return int(cover.sum()), total


intervals = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 60)), max_size=25)


@settings(max_examples=150, deadline=None)
@given(intervals, st.integers(0, 200), st.integers(1, 200))
def test_union_and_sums_match_brute_force(ivs, lo, width):
    starts = np.array([s for s, _ in ivs], np.int64)
    ends = np.array([s + d for s, d in ivs], np.int64)
    hi = lo + width
    busy_b, sum_b = _brute(starts, ends, lo, hi)
    u = measures.union(starts, ends)
    assert measures.covered_between(u, np.array([lo]), np.array([hi]))[0] == busy_b
    assert measures.overlap_sum_between(starts, ends, np.array([lo]), np.array([hi]))[0] == sum_b
    assert measures.clip(u, lo, hi).total_ns == busy_b
    assert measures.gaps(u, lo, hi).total_ns == width - busy_b


@settings(max_examples=100, deadline=None)
@given(intervals, intervals)
def test_intersect_and_subtract_match_brute_force(a, b):
    ua = measures.union([s for s, _ in a], [s + d for s, d in a])
    ub = measures.union([s for s, _ in b], [s + d for s, d in b])
    ca = np.zeros(400, bool)
    cb = np.zeros(400, bool)
    for s, e in zip(ua.start_ns, ua.end_ns):
        ca[s:e] = True
    for s, e in zip(ub.start_ns, ub.end_ns):
        cb[s:e] = True
    assert measures.intersect(ua, ub).total_ns == int((ca & cb).sum())
    assert measures.subtract(ua, ub).total_ns == int((ca & ~cb).sum())


def test_set_operations_on_unions_in_order_match_the_python_sweep():
    # Above SMALL, unions in order go through binary searches (measures._meet); disjoint pieces
    # that touch or have no length included. The Python sweep is the reference.
    import random

    from workflow_lib.diagnose.measures import SMALL, _sweep, _sweep_py
    from workflow_lib.diagnose.types import Intervals

    rng = random.Random(3)

    def raw_union(n):
        s = np.array([rng.randint(0, 2000) for _ in range(n)], np.int64)
        return measures.union(s, s + np.array([rng.randint(0, 60) for _ in range(n)], np.int64))

    def pieces(n):
        edges = np.cumsum([rng.randint(0, 20) for _ in range(2 * n)]).astype(np.int64)
        return Intervals(edges[0::2], edges[1::2])

    large = 0
    for t in range(1500):
        a = raw_union(rng.randint(0, 80)) if t % 2 else pieces(rng.randint(1, 60))
        b = raw_union(rng.randint(0, 80)) if t % 3 else pieces(rng.randint(1, 60))
        large += 2 * (len(a) + len(b)) > SMALL
        for keep in (True, False):
            got, ref = _sweep(a, b, keep), _sweep_py(a, b, keep)
            assert got.start_ns.tolist() == ref.start_ns.tolist() and got.end_ns.tolist() == ref.end_ns.tolist()
    assert large > 1000


def test_round6_is_pythons_round_to_six_places():
    """measures.round6 (the columns' shares and overlap factors) gives round(v, 6)'s floats,
    including values at a decimal half, where rint(v * 1e6) alone could land on the other side."""
    rng = np.random.default_rng(11)
    xs = np.concatenate([rng.random(20_000), rng.random(20_000) * 1e4, (rng.integers(0, 10**7, 20_000) + 0.5) / 1e6,
                         np.array([0.0, -1.5e-7, 2.5e-6, 0.0000125, 1e300, np.inf, -np.inf, np.nan])])
    got = measures.round6(xs).tolist()
    want = [round(v, 6) if np.isfinite(v) else v for v in xs.tolist()]
    assert all(a == b or (a != a and b != b) for a, b in zip(got, want))
    k, b = rng.integers(0, 10**9, 20_000), rng.integers(-3, 10**9, 20_000)
    values, null = measures.overlap_factors(k, b)
    for v, n, x, y in zip(values.tolist(), null.tolist(), k.tolist(), b.tolist()):
        ref = measures.overlap_factor(x, y)
        assert (ref is None) == n and (n or ref == v)
