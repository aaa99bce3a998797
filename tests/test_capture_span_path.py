"""The span hot path: per-(thread, name) span objects, the decorator's local start time,
and a ring counter that bulk inserts never replace."""

from __future__ import annotations

import os
import threading

import numpy as np

from workflow_lib.capture.ring import Ring
from workflow_lib.capture.sources.host import NAME_BITS, HostSource
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder


def _rows(host: HostSource) -> dict[str, np.ndarray]:
    return host.spans.copy().columns


def test_recursive_use_of_one_name_keeps_each_start(tmp_path):
    rec = recorder(tmp_path, sources=("host",))

    def nest(level):
        with rec.span("rec"):
            if level:
                nest(level - 1)

    with rec:
        nest(3)
        path = rec.snapshot("manual")
    s = read_incident(path).table("spans").to_pandas().sort_values("start_ns")
    assert len(s) == 4
    # Strictly nested: each later start ends earlier, and depth counts the levels.
    assert s["start_ns"].is_monotonic_increasing and s["end_ns"].is_monotonic_decreasing
    assert list(s["depth"]) == [0, 1, 2, 3]


def test_recursive_decorated_function(tmp_path):
    rec = recorder(tmp_path, sources=("host",))

    @rec.span("fact")
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    with rec:
        assert fact(5) == 120
        path = rec.snapshot("manual")
    s = read_incident(path).table("spans").to_pandas()
    assert sorted(s["depth"]) == [0, 1, 2, 3, 4]


def test_threads_nesting_the_same_names_keep_their_own_starts_and_ids():
    host = HostSource(1 << 12, 16)
    barrier = threading.Barrier(4)
    tids = []

    def body():
        tids.append(threading.get_native_id())
        barrier.wait()
        for _ in range(50):
            with host.span("outer"):
                with host.span("inner"):
                    with host.span("outer"):  # the outer name re-entered below another
                        pass

    ts = [threading.Thread(target=body) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c = _rows(host)
    tid = c["code"] >> NAME_BITS
    assert sorted(set(tid.tolist())) == sorted(tids)
    assert len(tid) == 4 * 50 * 3
    assert (c["end_ns"] >= c["start_ns"]).all()
    # Per thread, every span is either disjoint from or nested in every other: no start
    # of one thread leaked into another thread's span.
    for t in tids:
        m = tid == t
        st, en = c["start_ns"][m], c["end_ns"][m]
        a, b = np.meshgrid(np.arange(len(st)), np.arange(len(st)))
        overlap = (st[a] < st[b]) & (st[b] < en[a]) & (en[a] < en[b])
        assert not overlap.any()


def test_span_objects_are_per_thread_and_decorator_is_not():
    host = HostSource(64, 16)
    here = host.span("x")
    assert host.span("x") is here
    other = []
    t = threading.Thread(target=lambda: other.append(host.span("x")))
    t.start()
    t.join()
    assert other[0] is not here
    assert (here.code >> NAME_BITS) == threading.get_native_id()
    assert (other[0].code & ((1 << NAME_BITS) - 1)) == (here.code & ((1 << NAME_BITS) - 1))


def test_exception_in_span_restores_start_state(tmp_path):
    rec = recorder(tmp_path, sources=("host",))
    for _ in range(3):
        try:
            with rec.span("boom"):
                raise KeyError("x")
        except KeyError:
            pass
    assert rec.span("boom").t0 == 0 and rec.span("boom").outer == []
    assert len(_rows(rec.host)["seq"]) == 3


def test_bulk_insert_keeps_the_counter_hot_writers_hold():
    host = HostSource(256, 16)
    s = host.span("live")
    ctr = host.spans.ctr
    with s:
        pass
    host.add_spans("bulk", [7] * 10, np.arange(10), np.arange(10) + 1)
    with s:
        pass
    assert host.spans.ctr is ctr
    c = _rows(host)
    assert sorted(c["seq"].tolist()) == list(range(12))
    assert host.spans.written == 12


def test_ring_bytes_are_preallocated_and_counted():
    r = Ring("t", {"a": "q", "b": "d"}, 1 << 10)
    assert r.nbytes == 3 * 8 * (1 << 10) and r.row_bytes == 24
    assert all(len(a) == 1 << 10 for a in r.cols.values())
    r.append(5, 2.5)
    c = r.copy()
    assert c.columns["a"].tolist() == [5] and c.columns["b"].tolist() == [2.5] and c.columns["b"].dtype == np.float64


def test_forked_child_same_name_gets_child_thread_id(tmp_path):
    rec = recorder(tmp_path, sources=("host",))
    with rec.span("same"):  # cache the parent's per-thread object for this name
        pass
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with rec.span("same"):
                pass
            c = rec.host.spans.copy()
            os.write(w, f"{int(c.columns['code'][-1] >> NAME_BITS)} {os.getpid()}".encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 100).decode().split()
    os.waitpid(pid, 0)
    assert got[0] == got[1]
