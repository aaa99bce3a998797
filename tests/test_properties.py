"""Property-based tests (hypothesis): the store, the interval algebra, the statistics and
the readers that take outside input (tables, manifests, records, importers).

Readers of outside input have one property above all: whatever the bytes, they return a
value or raise a one-line StallcaseError, never anything else.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import blake3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from workflow_lib.core import records, tables as T
from workflow_lib.compare import stats
from workflow_lib.core.cas import CAS
from workflow_lib.diagnose import measures as M
from workflow_lib.diagnose.types import Intervals
from workflow_lib.core.errors import StallcaseError
from workflow_lib.core.incident import read_incident, source, write_incident

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _one_line(exc: StallcaseError) -> None:
    assert "\n" not in exc.oneline() and exc.problem


# ---------------------------------------------------------------- CAS

@FAST
@given(st.binary(max_size=4096))
def test_cas_put_get_round_trip_is_idempotent_and_named_by_blake3(data):
    with tempfile.TemporaryDirectory() as d:
        cas = CAS(d)
        digest = cas.put(data)
        assert digest == blake3.blake3(data).hexdigest()
        assert cas.put(data) == digest and cas.get_bytes(digest) == data
        src = Path(d) / "src.bin"
        src.write_bytes(data)
        assert cas.put(src) == digest
        assert list(cas.iter_digests()) == [digest] and cas.verify() == []


@FAST
@given(st.binary(min_size=1, max_size=2048), st.data())
def test_cas_any_change_to_an_object_is_caught(data, draw):
    with tempfile.TemporaryDirectory() as d:
        cas = CAS(d)
        digest = cas.put(data)
        path = cas.path_for(digest)
        i = draw.draw(st.integers(0, len(data) - 1))
        flip = draw.draw(st.integers(1, 255))
        damaged = bytearray(data)
        damaged[i] ^= flip
        os.chmod(path, 0o644)
        path.write_bytes(bytes(damaged))
        assert cas.verify() == [digest]
        with pytest.raises(StallcaseError) as ei:
            cas.get(digest)
        _one_line(ei.value)


@FAST
@given(st.text(max_size=80))
def test_cas_refuses_anything_but_a_hex_digest(text):
    assume(not (len(text) == 64 and all(c in "0123456789abcdef" for c in text)))
    with pytest.raises(StallcaseError):
        CAS("/nonexistent").path_for(text)


# ---------------------------------------------------------------- interval algebra

def _raw_intervals(max_n=12, span=60):
    return st.lists(st.tuples(st.integers(0, span), st.integers(0, span)), max_size=max_n).map(
        lambda pairs: (np.array([min(a, b) for a, b in pairs], np.int64), np.array([max(a, b) for a, b in pairs], np.int64)))


def _cover(s: np.ndarray, e: np.ndarray, span: int = 64) -> np.ndarray:
    """Brute force: which unit cells [t, t+1) are covered."""
    grid = np.zeros(span, bool)
    for a, b in zip(s.tolist(), e.tolist()):
        grid[a:b] = True
    return grid


def _cells(iv: Intervals, span: int = 64) -> np.ndarray:
    return _cover(iv.start_ns, iv.end_ns, span)


def _well_formed(iv: Intervals) -> None:
    s, e = iv.start_ns, iv.end_ns
    assert np.all(e > s)  # no empty pieces
    assert np.all(s[1:] > e[:-1])  # sorted, disjoint, not touching (touching ones merge)


@FAST
@given(_raw_intervals())
def test_union_covers_exactly_the_inputs(raw):
    u = M.union(*raw)
    _well_formed(u)
    assert np.array_equal(_cells(u), _cover(*raw))
    assert int((u.end_ns - u.start_ns).sum()) == int(_cover(*raw).sum())


@FAST
@given(_raw_intervals(), _raw_intervals())
def test_intersect_and_subtract_match_set_algebra(ra, rb):
    a, b = M.union(*ra), M.union(*rb)
    i, d = M.intersect(a, b), M.subtract(a, b)
    _well_formed(i)
    _well_formed(d)
    assert np.array_equal(_cells(i), _cells(a) & _cells(b))
    assert np.array_equal(_cells(d), _cells(a) & ~_cells(b))
    assert np.array_equal(_cells(M.union_many(i, d)), _cells(a))  # a = (a and b) + (a not b)


@FAST
@given(_raw_intervals(), st.integers(0, 64), st.integers(0, 64))
def test_clip_gaps_and_covered_partition_a_window(raw, x, y):
    lo, hi = min(x, y), max(x, y)
    u = M.union(*raw)
    c, g = M.clip(u, lo, hi), M.gaps(u, lo, hi)
    window = np.zeros(64, bool)
    window[lo:hi] = True
    assert np.array_equal(_cells(c), _cells(u) & window)
    assert np.array_equal(_cells(g), window & ~_cells(u))
    busy = int(M.covered_between(u, np.array([lo]), np.array([hi]))[0])
    assert busy == int((_cells(u) & window).sum())
    assert busy + g.total_ns == hi - lo


@FAST
@given(_raw_intervals(), st.lists(st.tuples(st.integers(0, 64), st.integers(0, 64)), min_size=1, max_size=5))
def test_overlap_sum_counts_every_overlap(raw, windows):
    lo = np.array([min(a, b) for a, b in windows], np.int64)
    hi = np.array([max(a, b) for a, b in windows], np.int64)
    got = M.overlap_sum_between(raw[0], raw[1], lo, hi)
    want = [sum(max(0, min(e, h) - max(s, l)) for s, e in zip(raw[0].tolist(), raw[1].tolist())) for l, h in zip(lo, hi)]
    assert got.tolist() == want


# ---------------------------------------------------------------- statistics

@FAST
@given(st.integers(0, 40))
def test_signed_rank_cdf_is_a_distribution(n):
    cdf = stats.signed_rank_cdf(n)
    assert cdf.size == n * (n + 1) // 2 + 1
    assert np.all(np.diff(cdf) >= -1e-15) and math.isclose(cdf[-1], 1.0, rel_tol=1e-12)
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    assert np.allclose(pmf, pmf[::-1], atol=1e-15)  # T+ is symmetric about n(n+1)/4


@FAST
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30), st.floats(-1e5, 1e5, allow_nan=False),
       st.sampled_from([0.9, 0.95, 0.99]))
def test_hodges_lehmann_is_shift_equivariant_and_its_interval_holds_the_estimate(xs, shift, conf):
    x = np.array(xs)
    est, lo, hi = stats.hodges_lehmann(x, conf)
    est2, lo2, hi2 = stats.hodges_lehmann(x + shift, conf)
    tol = 1e-6 * (1 + abs(shift) + np.abs(x).max())
    assert abs(float(est2) - (float(est) + shift)) <= tol
    k = stats.walsh_rank(x.size, conf)
    if k is None:
        assert np.isnan(lo) and np.isnan(hi)
    else:
        assert lo <= est <= hi
        assert abs(float(lo2) - (float(lo) + shift)) <= tol and abs(float(hi2) - (float(hi) + shift)) <= tol
    assert x.size >= stats.min_blocks(conf) or k is None


@FAST
@given(st.floats(0.001, 0.999), st.floats(0.5, 200.0))
def test_t_ppf_inverts_t_cdf(q, df):
    t = stats.t_ppf(q, df)
    assert math.isclose(stats.t_cdf(t, df), q, abs_tol=1e-9)
    assert math.isclose(stats.t_ppf(1 - q, df), -t, abs_tol=1e-7 * (1 + abs(t)))


@FAST
@given(st.integers(1, 200), st.data(), st.sampled_from([0.8, 0.95, 0.99]))
def test_clopper_pearson_interval_contains_the_observed_rate(trials, data, conf):
    k = data.draw(st.integers(0, trials))
    lo, hi = stats.clopper_pearson(k, trials, conf)
    assert 0.0 <= lo <= k / trials <= hi <= 1.0
    assert stats.clopper_pearson_upper(k, trials, conf) <= hi + 1e-9


@FAST
@given(st.floats(0.1, 20), st.floats(0.1, 20), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_betainc_is_a_monotone_cdf(a, b, x, y):
    lo, hi = min(x, y), max(x, y)
    fa, fb = stats.betainc(a, b, lo), stats.betainc(a, b, hi)
    assert -1e-12 <= fa <= fb + 1e-9 <= 1.0 + 1e-9


# ---------------------------------------------------------------- readers of outside input

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                     max_leaves=20)


@FAST
@given(st.one_of(st.binary(max_size=300), _JSON.map(lambda v: json.dumps(v).encode())),
       st.sampled_from(["incident_manifest", "snapshot", "plan", "execution", "comparison"]))
def test_record_parser_returns_a_record_or_one_line_error(data, kind):
    try:
        rec = records.parse_record(data, kind, "in.json")
    except StallcaseError as exc:
        _one_line(exc)
    else:
        records.validate(rec, kind)


def _steps_tables():
    row = st.tuples(st.integers(0, 10**6), st.integers(1, 4), st.integers(0, 10**12), st.integers(0, 10**9))
    return st.lists(row, min_size=1, max_size=30, unique_by=lambda r: r[0]).map(lambda rows: pa.table({
        "step_id": [r[0] for r in rows], "thread_id": [r[1] for r in rows],
        "start_ns": [r[2] for r in rows], "end_ns": [r[2] + r[3] for r in rows]}))


@FAST
@given(_steps_tables())
def test_incident_write_read_round_trip_or_refuse_on_write(steps):
    """What write_incident accepts, read_incident reads back unchanged; what it refuses leaves nothing."""
    with tempfile.TemporaryDirectory() as d:
        manifest = {"incident_id": "p", "reason": "manual", "clock": {"host": "monotonic"},
                    "sources": {"steps": source("observed")}, "created_unix_ns": 1}
        try:
            write_incident(Path(d) / "p", manifest, {"steps": steps})
        except StallcaseError as exc:
            _one_line(exc)
            assert not (Path(d) / "p").exists()
            return
        got = read_incident(Path(d) / "p").table("steps")
        want = T.conform("steps", steps)
        assert got.equals(want)


@FAST
@given(st.binary(min_size=0, max_size=2000), st.sampled_from(sorted(T.TABLES)))
def test_table_reader_takes_any_bytes(data, name):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.parquet"
        p.write_bytes(data)
        try:
            T.read_table(p, name)
        except StallcaseError as exc:
            _one_line(exc)


@FAST
@given(_steps_tables(), st.data())
def test_table_reader_takes_any_damage_to_a_real_table(steps, draw):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "steps.parquet"
        import pyarrow.parquet as pq

        pq.write_table(steps, p)
        data = bytearray(p.read_bytes())
        for _ in range(draw.draw(st.integers(1, 4))):
            i = draw.draw(st.integers(0, len(data) - 1))
            data[i] = draw.draw(st.integers(0, 255))
        cut = draw.draw(st.integers(0, len(data)))
        p.write_bytes(bytes(data[:cut]))
        try:
            T.read_table(p, "steps")
        except StallcaseError as exc:
            _one_line(exc)


@FAST
@given(st.one_of(st.binary(max_size=400), _JSON.map(lambda v: json.dumps({"traceEvents": v}).encode())))
def test_kineto_importer_takes_any_bytes(data):
    from workflow_lib.importers.kineto import import_kineto

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "t.json"
        f.write_bytes(data)
        try:
            import_kineto([f], incident_id="k", incidents_dir=Path(d) / "inc")
        except StallcaseError as exc:
            _one_line(exc)
            assert not (Path(d) / "inc" / "k" / "manifest.json").exists()


_ANY = st.one_of(st.none(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=5), st.booleans(),
                 st.lists(st.integers(), max_size=3))
_EVENT = st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["X", "i", None, 5]),
    "cat": st.sampled_from(["kernel", "cpu_op", "user_annotation", "cuda_runtime", "gpu_memcpy", None, 3]),
    "name": st.one_of(st.sampled_from(["ProfilerStep#1", "ProfilerStep#2", "gemm", "cudaMemcpy"]), _ANY),
    "ts": _ANY, "dur": _ANY, "pid": _ANY, "tid": _ANY,
    "args": st.one_of(_ANY, st.fixed_dictionaries({}, optional={k: _ANY for k in ("device", "stream", "correlation", "grid", "bytes")}))})


@FAST
@given(st.lists(st.one_of(_EVENT, _ANY), max_size=8), st.one_of(st.none(), _ANY))
def test_kineto_importer_takes_any_events(events, base):
    """Event-shaped input reaches the Arrow fast path (a null first row once crashed it)."""
    from workflow_lib.importers.kineto import import_kineto

    trace = {"traceEvents": events} if base is None else {"traceEvents": events, "baseTimeNanoseconds": base}
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "t.json"
        f.write_bytes(json.dumps(trace).encode())
        try:
            out = import_kineto([f], incident_id="k", incidents_dir=Path(d) / "inc")
        except StallcaseError as exc:
            _one_line(exc)
            assert not (Path(d) / "inc" / "k" / "manifest.json").exists()
        else:
            read_incident(out)  # what the importer writes, the reader accepts


@FAST
@given(st.binary(max_size=300))
def test_restricted_unpickler_takes_any_bytes_and_never_calls(data):
    from workflow_lib.core import safe_pickle

    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            safe_pickle.loads_restricted(data, "dump.pkl")
        except StallcaseError as exc:
            _one_line(exc)
        finally:
            os.chdir(cwd)
        assert not Path(d, "PWNED").exists()
