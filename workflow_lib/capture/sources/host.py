"""Host spans and steps: the hot path.

A span costs two clock reads, a push and pop on a per-thread stack and four array
stores; the span object itself is cached per name. Thread ids are
Linux tids (the ids /proc and the sched table use), cached in a `threading.local`
because `threading.get_native_id()` is a syscall (~0.3 us); a dict keyed by
`threading.get_ident()` would be wrong, as idents are reused after a thread ends.
Name and tid share one int64 (`tid << 20 | name_id`) to save a store. Depth is not
tracked on the hot path; it is derived from nesting when the snapshot is taken.
"""

from __future__ import annotations

import functools
import os
import threading

import numpy as np
import pyarrow as pa

from ..clock import now_ns
from ..ring import Ring, RingCopy

NAME_BITS = 20
MAX_NAMES = (1 << NAME_BITS) - 1
OVERFLOW_NAME = "<span names over budget>"

_TLS = threading.local()


def _reset_after_fork() -> None:
    # A forked child inherits the parent's thread-local values: its thread ids differ.
    global _TLS
    _TLS = threading.local()


os.register_at_fork(after_in_child=_reset_after_fork)


def current_tid_shifted() -> int:
    try:
        return _TLS.t
    except AttributeError:
        t = _TLS.t = threading.get_native_id() << NAME_BITS
        return t


class _Span:
    """One per span name, shared by every thread: `with` and `@decorator` both work.

    The start time lives on a per-thread stack, not on this object, so one object serves
    nested, recursive and concurrent uses without an allocation per span.
    """

    __slots__ = ("ring", "code")

    def __init__(self, ring: Ring, code: int):
        self.ring = ring
        self.code = code

    def __enter__(self):
        try:
            _TLS.stack.append(now_ns())
        except AttributeError:
            current_tid_shifted()
            _TLS.stack = [now_ns()]
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        tls = _TLS
        t0 = tls.stack.pop()
        r = self.ring
        k = next(r.ctr)
        j = k & r.mask
        r.st[j] = t0
        r.en[j] = t1
        r.cd[j] = tls.t | self.code
        r.seq[j] = k
        return False

    def __call__(self, fn):
        span = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with span:
                return fn(*args, **kwargs)

        return wrapper


class HostSource:
    """Owns the spans and steps rings and the span-name table."""

    def __init__(self, span_capacity: int, step_capacity: int):
        self.spans = Ring("spans", {"start_ns": "q", "end_ns": "q", "code": "q"}, span_capacity)
        # Direct attributes: a dict lookup per store would cost more than the store.
        self.spans.st, self.spans.en, self.spans.cd = (self.spans.cols[c] for c in ("start_ns", "end_ns", "code"))
        self.steps = Ring("steps", {"step_id": "q", "tid": "q", "start_ns": "q", "end_ns": "q"}, step_capacity)
        self._names: dict[str, int] = {}
        self._name_list: list[str] = []
        self._names_lock = threading.Lock()
        self.names_over_budget = 0
        self.last_repeated_step_ids = 0
        self._span_cache: dict[str, _Span] = {}

    @property
    def nbytes(self) -> int:
        return self.spans.nbytes + self.steps.nbytes

    def name_id(self, name: str) -> int:
        i = self._names.get(name)
        if i is not None:
            return i
        with self._names_lock:
            i = self._names.get(name)
            if i is None:
                if len(self._name_list) >= MAX_NAMES - 1:
                    # The name table is bounded too: extra names share one id, and we say so.
                    self.names_over_budget += 1
                    return self.name_id_overflow()
                i = len(self._name_list)
                self._name_list.append(str(name))
                self._names[name] = i
        return i

    def name_id_overflow(self) -> int:
        i = self._names.get(OVERFLOW_NAME)
        if i is None:
            i = len(self._name_list)
            self._name_list.append(OVERFLOW_NAME)
            self._names[OVERFLOW_NAME] = i
        return i

    def span(self, name: str) -> _Span:
        s = self._span_cache.get(name)
        if s is None:
            s = _Span(self.spans, self.name_id(name))
            if len(self._span_cache) < MAX_NAMES:
                self._span_cache[name] = s
        return s

    def record_step(self, step_id: int, start_ns: int, end_ns: int, thread_id: int | None = None) -> None:
        tid = current_tid_shifted() >> NAME_BITS if thread_id is None else thread_id
        self.steps.append(step_id, tid, start_ns, end_ns)

    def add_spans(self, names, thread_ids, start_ns, end_ns) -> None:
        """Vectorized bulk insert of complete spans (tests, importers of host annotations).
        `names` is one name for all, or one per span."""
        if isinstance(names, str):
            ids = np.int64(self.name_id(names))
        else:
            uniq, inv = np.unique(np.asarray(names, dtype=object), return_inverse=True)
            ids = np.array([self.name_id(str(u)) for u in uniq], dtype=np.int64)[inv]
        code = (np.asarray(thread_ids, dtype=np.int64) << NAME_BITS) | ids
        self.spans.extend(start_ns=np.asarray(start_ns, np.int64), end_ns=np.asarray(end_ns, np.int64), code=code)

    def spans_table(self, copy: RingCopy, since_ns: int, until_ns: int) -> pa.Table:
        c = copy.columns
        keep = (c["end_ns"] >= since_ns) & (c["end_ns"] <= until_ns)
        start, end, code = c["start_ns"][keep], c["end_ns"][keep], c["code"][keep]
        tid = code >> NAME_BITS
        name_idx = code & MAX_NAMES
        names = np.array(self._name_list + [OVERFLOW_NAME], dtype=object)
        name_idx = np.minimum(name_idx, len(names) - 1)
        depth = nesting_depth(tid, start, end)
        return pa.table({
            "name": pa.array(names[name_idx], type=pa.string()),
            "thread_id": pa.array(tid, pa.int64()),
            "depth": pa.array(depth, pa.int32()),
            "start_ns": pa.array(start, pa.int64()),
            "end_ns": pa.array(end, pa.int64()),
        })

    def steps_table(self, copy: RingCopy, since_ns: int, until_ns: int) -> pa.Table:
        c = copy.columns
        keep = (c["end_ns"] >= since_ns) & (c["end_ns"] <= until_ns)
        ids, start, end, tid = c["step_id"][keep], c["start_ns"][keep], c["end_ns"][keep], c["tid"][keep]
        # A step id is unique per rank in the contract: if a workload reuses ids (two loops),
        # the latest occurrence is kept and the repeat count is reported by the caller.
        _, last = np.unique(ids[::-1], return_index=True)
        sel = np.sort(len(ids) - 1 - last)
        self.last_repeated_step_ids = int(len(ids) - len(sel))
        return pa.table({
            "step_id": pa.array(ids[sel], pa.int64()),
            "thread_id": pa.array(tid[sel], pa.int64()),
            "start_ns": pa.array(start[sel], pa.int64()),
            "end_ns": pa.array(end[sel], pa.int64()),
        })


def nesting_depth(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each span among the retained spans of its thread (0 = outermost).

    Starts count +1 and ends -1 on a per-thread timeline; a span's depth is the number
    of spans open when it starts. At equal times ends sort before starts (back-to-back
    spans are siblings) and a longer span starts before a shorter one (parent first).
    Spans whose parent is still open or was overwritten are counted from the oldest
    retained one, which is the most the ring can say.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    t = np.concatenate([start, end])
    kind = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
    tie = np.concatenate([-end, np.zeros(n, np.int64)])
    th = np.concatenate([tid, tid])
    order = np.lexsort((tie, kind, t, th))
    delta = np.where(kind[order] == 1, 1, -1)
    # Every retained span has both events, so each thread's sum returns to zero and a
    # single cumulative sum over the thread-sorted events is per-thread.
    open_before = np.cumsum(delta) - delta
    depth = np.empty(n, dtype=np.int32)
    is_start = order < n
    depth[order[is_start]] = open_before[is_start]
    return depth
