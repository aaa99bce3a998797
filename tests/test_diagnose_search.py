"""diagnose/search.py: the galloping sorted search (_searchext.c) gives numpy.searchsorted's
answers, for keys in order (the joins' case), out of order, repeated, outside the values, and
for values with runs of equal times; small or non-int64 inputs go to numpy itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from workflow_lib.diagnose import search

needs_ext = pytest.mark.skipif(search._searchext is None, reason="the C sorted search is not built here (no compiler)")
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
    monkeypatch.setattr(search, "_searchext", None)
    a = np.arange(0, 1000, 3, dtype=np.int64)
    k = np.arange(-5, 1005, dtype=np.int64)
    np.testing.assert_array_equal(search.searchsorted(a, k, side="right"), np.searchsorted(a, k, side="right"))


def test_inputs_the_c_path_does_not_take_go_to_numpy():
    a = np.arange(0, 100, dtype=np.int64)
    for values, keys in ((a, 5), (a, np.arange(200, dtype=np.int32)), (a.astype(float), np.arange(200.0)),
                         (list(range(100)), np.arange(200, dtype=np.int64)), (a, np.arange(200, dtype=np.int64).reshape(2, 100))):
        np.testing.assert_array_equal(search.searchsorted(values, keys), np.searchsorted(values, keys))
