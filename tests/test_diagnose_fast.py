"""diagnose/fast.py's C paths (_fastext.c) against their twins: the galloping sorted search gives
numpy.searchsorted's answers, for keys in order (the joins' case), out of order, repeated,
outside the values, and for values with runs of equal times (small or non-int64 inputs go to
numpy itself); the gap texts are the Python path's, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from workflow_lib.diagnose import fast as search

needs_ext = pytest.mark.skipif(search._fastext is None, reason="the diagnosis's C paths are not built here (no compiler)")
times = hs.lists(hs.integers(-50, 50), max_size=300)


@needs_ext
@settings(max_examples=300, deadline=None)
@given(values=times, keys=times, in_order=hs.booleans(), side=hs.sampled_from(["left", "right"]))
def test_the_gallop_answers_as_numpy_does(values, keys, in_order, side):
    a = np.sort(np.array(values, np.int64))
    k = np.array(sorted(keys) if in_order else keys, np.int64)
    k = np.concatenate([k] * (1 + search.SMALL // max(k.size, 1)))  # past SMALL, so the C path answers
    got = search.searchsorted(a, k, side=side)
    assert got.dtype == np.intp
    np.testing.assert_array_equal(got, np.searchsorted(a, k, side=side))


@needs_ext
def test_long_strides_both_ways():
    """Keys far apart (the gallop's doubling, then its binary search) and keys that go back."""
    rng = np.random.default_rng(7)
    a = np.sort(rng.integers(0, 10**9, 200_000)).astype(np.int64)
    for k in (np.sort(rng.integers(-10, 10**9 + 10, 1000)), rng.integers(-10, 10**9 + 10, 5000),
              np.sort(rng.integers(0, 10**9, 300_000))[::-1].copy(), np.repeat(a[::997], 3)):
        k = k.astype(np.int64)
        for side in ("left", "right"):
            np.testing.assert_array_equal(search.searchsorted(a, k, side=side), np.searchsorted(a, k, side=side))


def test_without_the_c_path_numpy_answers(monkeypatch):
    """The CPU twin of the tests above where the extension is missing: the fallback is numpy's."""
    monkeypatch.setattr(search, "_fastext", None)
    a = np.arange(0, 1000, 3, dtype=np.int64)
    k = np.arange(-5, 1005, dtype=np.int64)
    np.testing.assert_array_equal(search.searchsorted(a, k, side="right"), np.searchsorted(a, k, side="right"))


def test_inputs_the_c_path_does_not_take_go_to_numpy():
    a = np.arange(0, 100, dtype=np.int64)
    for values, keys in ((a, 5), (a, np.arange(200, dtype=np.int32)), (a.astype(float), np.arange(200.0)),
                         (list(range(100)), np.arange(200, dtype=np.int64)), (a, np.arange(200, dtype=np.int64).reshape(2, 100))):
        np.testing.assert_array_equal(search.searchsorted(values, keys), np.searchsorted(values, keys))


def _gap_columns(rng, steps: int, most: int):
    per = rng.integers(0, most + 1, steps)
    offsets = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
    m = int(offsets[-1])
    start = rng.integers(-2**62, 2**62, m, dtype=np.int64)
    start[: min(m, 3)] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0][: min(m, 3)]
    end = rng.integers(-10**15, 10**15, m, dtype=np.int64)
    return start, end, end - start // 2, offsets


@needs_ext
@pytest.mark.parametrize("steps,most", [(0, 0), (1, 0), (5, 1), (2000, 5), (300, 40)])
def test_gap_texts_are_the_python_paths(monkeypatch, steps, most):
    cols = _gap_columns(np.random.default_rng(steps + most), steps, most)
    got = search.gaps_json(*cols)
    monkeypatch.setattr(search, "_fastext", None)
    want = search.gaps_json(*cols)
    assert got.type == want.type and len(got) == steps
    assert got.to_pylist() == want.to_pylist()
    assert got.equals(want)


@needs_ext
def test_gap_texts_refuse_offsets_that_do_not_cover_the_gaps():
    start, end, length, offsets = _gap_columns(np.random.default_rng(1), 10, 3)
    with pytest.raises(ValueError, match="offsets"):
        search.gaps_json(start, end, length, offsets[:-1])
    with pytest.raises(ValueError, match="unequal"):
        search.gaps_json(start, end[:-1], length, offsets)
