"""The optional C span path (_spanext) against the pure-Python one: same rows, same ring
contract, its own checks on bad input, and a fresh cache after fork."""

from __future__ import annotations

import array
import itertools
import os
import threading

import numpy as np
import pytest

from capture_helpers import in_forked_child
from workflow_lib.capture.sources import host as host_mod
from workflow_lib.capture.sources.host import NAME_BITS, HostSource

ext = host_mod._spanext
needs_ext = pytest.mark.skipif(ext is None, reason="C span path not built here (no compiler, or STALLCASE_SPAN_PATH=python)")


def _python_host(cap=1 << 10) -> HostSource:
    saved = host_mod._spanext
    host_mod._spanext = None
    try:
        return HostSource(cap, 16)
    finally:
        host_mod._spanext = saved


def _workload(span):
    for i in range(5):
        with span("a"):
            with span("b"):
                with span("a"):  # re-entry of a name below another
                    pass
    try:
        with span("err"):
            raise KeyError("x")
    except KeyError:
        pass


def _shape(host: HostSource):
    c = host.spans.copy().columns
    order = np.argsort(c["seq"])
    names = [host._name_list[int(x) & ((1 << NAME_BITS) - 1)] for x in c["code"][order]]
    dur_ok = bool((c["end_ns"] >= c["start_ns"]).all())
    return names, list(c["seq"][order]), dur_ok, set((c["code"] >> NAME_BITS).tolist())


def test_python_path_is_used_without_the_extension():
    host = _python_host()
    assert host.span_path == "python" or host._lookup is None
    assert host._lookup is None


@needs_ext
def test_c_and_python_paths_write_the_same_rows():
    c_host, py_host = HostSource(1 << 10, 16), _python_host()
    assert c_host._lookup is not None
    _workload(c_host.span)
    _workload(py_host.span)
    c_names, c_seq, c_ok, c_tids = _shape(c_host)
    p_names, p_seq, p_ok, p_tids = _shape(py_host)
    assert c_names == p_names and c_seq == p_seq and c_ok and p_ok
    assert c_tids == p_tids == {threading.get_native_id()}
    # Nesting is exact: each inner span lies within its outer one.
    c = c_host.spans.copy().columns
    a_outer = [i for i, n in enumerate(c_names) if n == "a"][1::2]
    b = [i for i, n in enumerate(c_names) if n == "b"]
    for ia, ib in zip(a_outer, b):
        assert c["start_ns"][ia] <= c["start_ns"][ib] and c["end_ns"][ib] <= c["end_ns"][ia]


@needs_ext
def test_c_span_shares_the_ring_counter_with_bulk_inserts_and_wraps():
    host = HostSource(16, 16)
    host.add_spans("bulk", [1, 2, 3], [1, 2, 3], [2, 3, 4])
    for _ in range(40):
        with host.span("x"):
            pass
    c = host.spans.copy()
    assert c.written == 43 and c.rows == 16
    assert list(c.columns["seq"]) == list(range(27, 43))


@needs_ext
def test_c_span_per_thread_objects_and_ids():
    host = HostSource(1 << 12, 16)
    seen = {}

    def body():
        with host.span("t"):
            pass
        seen[threading.get_native_id()] = host.span("t")

    ts = [threading.Thread(target=body) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    objs = list(seen.values())
    assert len({id(o) for o in objs}) == 3
    tids = set((host.spans.copy().columns["code"] >> NAME_BITS).tolist())
    assert tids == set(seen)


@needs_ext
def test_c_span_refuses_bad_columns():
    ctr = itertools.count()
    good = [array.array("q", [0]) * 8 for _ in range(4)]
    with pytest.raises(TypeError):
        ext.Span(array.array("d", [0.0]) * 8, *good[1:], ctr, 7, 1)
    with pytest.raises(ValueError):
        ext.Span(array.array("q", [0]) * 4, *good[1:], ctr, 7, 1)
    with pytest.raises(ValueError):
        ext.Span(*good, ctr, 3, 1)  # mask does not match the capacity
    s = ext.Span(*good, ctr, 7, 5)
    with pytest.raises(BufferError):  # exported buffers: the ring cannot be resized under the span
        good[0].append(1)
    with s:
        pass
    assert good[3][0] == 0 and good[2][0] == 5 and good[1][0] >= good[0][0] > 0


@needs_ext
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_c_span_after_fork_carries_the_child_tid():
    host = HostSource(1 << 10, 16)
    with host.span("p"):
        pass

    def child():  # its span must carry its own tid
        with host.span("p"):
            pass
        c = host.spans.copy().columns
        return int(c["code"][np.argmax(c["seq"])] >> NAME_BITS) == threading.get_native_id()

    assert in_forked_child(child)
