"""The evidence's two fast paths against the plain definitions they replaced (same answers):
- cupti_sessions: a session per CUPTI attach, a new one where the ids restart (below half the
  session's largest so far); the reference scans the rest of the calls once per session;
- _row_codes: the kernels' identity codes, each row's rank among the distinct rows in
  lexicographic order, as np.unique(axis=0, return_inverse=True) gives them."""

from __future__ import annotations

import re

import numpy as np

from workflow_lib.diagnose.evidence import _row_codes, cupti_sessions


def _sessions_by_rescanning(corr: np.ndarray) -> np.ndarray:
    out = np.zeros(corr.size, np.int64)
    at, k = 0, 0
    while at < corr.size:
        c = np.maximum(corr[at:], 0)
        drop = np.flatnonzero((corr[at:] > 0) & (c < np.maximum.accumulate(c) // 2))
        if drop.size == 0:
            break
        at += int(drop[0])
        k += 1
        out[at:] = k
    return out


def _ids(rng) -> np.ndarray:
    """Sessions of ids from 1 that threads interleave by a few, some calls with ids of their own
    far above (a trace's syncs), some unknown (-1)."""
    parts, n = [], int(rng.integers(0, 30_000))
    while sum(p.size for p in parts) < n:
        m = int(rng.integers(1, 12_000))
        a = np.arange(1, m + 1) + rng.integers(-3, 4, m)
        if rng.random() < 0.3:
            a[rng.integers(0, m, max(1, m // 50))] = rng.integers(100_000, 900_000)
        if rng.random() < 0.2:
            a[rng.integers(0, m, max(1, m // 50))] = -1
        parts.append(a)
    return np.concatenate(parts)[:n].astype(np.int64) if parts else np.zeros(0, np.int64)


def test_sessions_are_those_of_the_rescanning_definition():
    rng = np.random.default_rng(20261204)
    sessions = 0
    for _ in range(200):
        corr = _ids(rng)
        got = cupti_sessions(corr)
        assert np.array_equal(got, _sessions_by_rescanning(corr))
        sessions += int(got.max()) if got.size else 0
    assert sessions > 1000  # the cases hold many restarts, real and spurious


def test_a_restart_past_the_first_window_is_found():
    corr = np.concatenate([np.arange(1, 50_001), np.arange(1, 20_001), np.arange(1, 10)]).astype(np.int64)
    got = cupti_sessions(corr)
    assert got[49_999] == 0 and got[50_000] == 1 and got[70_000] == 2 and got[-1] == 2


def test_row_codes_are_np_unique_inverse_over_rows():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, k = int(rng.integers(1, 4000)), int(rng.integers(1, 8))
        cols = [rng.integers(0, 60, n)] + [rng.integers(-1, int(rng.integers(1, 6)), n) for _ in range(k - 1)]
        cols = [c.astype(np.int64) for c in cols]
        ref = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
        assert np.array_equal(_row_codes(cols), ref)
    assert _row_codes([np.zeros(0, np.int64)]).size == 0


def _launch_then_low_id_sync(producer: str, detached=None):
    """Call 1: a launch (id 900) whose kernel runs after call 2 started; call 2: a synchronize
    carrying a low id of its own (5), as the synthetic 1M-event trace's syncs do: far below the
    ids before it, so a restart by cupti_sessions' rule."""
    from tests.builders import api, kernel, make_incident, step
    from workflow_lib.diagnose.evidence import build

    inc = make_incident(steps=[step(0, 0, 100_000)], producer=producer,
                        runtime_api=[api(1_000, 2_000, name="cudaLaunchKernel", corr=900),
                                     api(3_000, 60_000, name="cudaDeviceSynchronize", corr=5)],
                        kernels=[kernel(10_000, 50_000, corr=900)])
    if detached is not None:
        inc.manifest["sources"]["cupti"] = {"status": "observed", "detail": {"detached_between_windows": detached}}
    return build(inc, -1, 0, re.compile(r"$^"))


def test_an_imported_trace_is_one_cupti_session():
    """A Kineto or Nsight import is one profiler session: its kernel joins the launch before the
    low-id sync. A recorder capture that detached CUPTI between windows (or says nothing, as
    older ones) keeps the sessions: there the same low id after high ones is a re-attach, and a
    call of the earlier session is not the kernel's launch; one that never detached is one session."""
    from workflow_lib.diagnose.evidence import launch_rows_at

    for producer, detached, joined in (("kineto-import", None, True), ("nsys-import", None, True),
                                       ("stallcase-recorder", 0, True), ("stallcase-recorder", 2, False),
                                       ("stallcase-recorder", None, False)):
        ev = _launch_then_low_id_sync(producer, detached)
        rows, ok = launch_rows_at(ev, ev.k_corr, ev.k_start)
        assert bool(ok[0]) is joined, (producer, detached)
        if joined:
            assert rows[0] == 0
