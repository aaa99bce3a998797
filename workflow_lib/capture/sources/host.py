"""Host spans and steps: the hot path.

A span object exists per (thread, name): it holds the thread|name code precombined, its
start time in a slot, and direct references to the ring's arrays and counter, so a span
costs two clock reads, one `next()` on the ring counter and four int64 stores, with no
thread-local stack. A name that re-enters itself on one thread (recursion) keeps the outer
start on a small per-object list. `@rec.span("f")` keeps the start in the wrapper's frame
(no `with`, no per-object state), so one decorated function serves every thread. Each
variant tried, with numbers: benchmarks/span_cost.py and docs/benchmarks.md.

With the optional C extension (`_spanext`, built by setup.py where a compiler exists), the
same span lives in C: `__enter__`/`__exit__` are C methods and the per-thread lookup is a C
dict lookup, so a span runs no Python bytecode (docs/benchmarks.md: what a `with` costs and
why C). Without it, or with STALLCASE_SPAN_PATH=python, the pure-Python `_Span` below is used;
both write the same rows under the same ring contract, and `SPAN_PATH` says which is in use.

Thread ids are Linux tids (the ids /proc and the sched table use), cached in a
`threading.local` because `threading.get_native_id()` is a syscall (~0.3 us); a dict keyed
by `threading.get_ident()` would be wrong, as idents are reused after a thread ends. Name
and tid share one int64 (`tid << 20 | name_id`) to save a store. Depth is not tracked on
the hot path; it is derived from nesting when the snapshot is taken.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref

import numpy as np
import pyarrow as pa

from ...core import arrow
from ..clock import now_ns
from ..ring import Ring, RingCopy

NAME_BITS = 20
MAX_NAMES = (1 << NAME_BITS) - 1
OVERFLOW_NAME = "<span names over budget>"
DETAIL_CAPACITY = 4096  # span_details rows kept (GC collections and checkpoint saves: a few per step)

from ..cext import PATH as SPAN_PATH, span as _spanext

_TLS = threading.local()
_SOURCES: "weakref.WeakSet[HostSource]" = weakref.WeakSet()


def _reset_after_fork() -> None:
    # A forked child inherits the parent's thread-local values: its thread ids differ, and
    # so do the codes precombined in the per-thread span objects.
    global _TLS
    _TLS = threading.local()
    for src in list(_SOURCES):
        src._tls = threading.local()
        if src._lookup is not None:
            src._lookup.reset()


os.register_at_fork(after_in_child=_reset_after_fork)


def current_tid_shifted() -> int:
    try:
        return _TLS.t
    except AttributeError:
        t = _TLS.t = threading.get_native_id() << NAME_BITS
        return t


class _Span:
    """One per (thread, name): `with` on the thread that looked it up; `@decorator` anywhere.

    `t0` is 0 while the span is not open (monotonic_ns is never 0 once a process runs).
    """

    __slots__ = ("st", "en", "cd", "sq", "ctr", "mask", "code", "t0", "outer")

    def __init__(self, ring: Ring, code: int):
        c = ring.cols
        self.st, self.en, self.cd, self.sq = c["start_ns"], c["end_ns"], c["code"], c["seq"]
        self.ctr, self.mask, self.code = ring.ctr, ring.mask, code
        self.t0 = 0
        self.outer: list[int] = []

    def __enter__(self):
        if self.t0:  # re-entered on this thread (recursion): keep the outer start
            self.outer.append(self.t0)
        self.t0 = now_ns()
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        k = next(self.ctr)
        j = k & self.mask
        self.st[j] = self.t0
        self.t0 = self.outer.pop() if self.outer else 0
        self.en[j] = t1
        self.cd[j] = self.code
        self.sq[j] = k  # last: the commit mark
        return False

    def __call__(self, fn):
        st, en, cd, sq, ctr, mask = self.st, self.en, self.cd, self.sq, self.ctr, self.mask
        name_code = self.code & MAX_NAMES  # the thread part is the caller's, looked up per call

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = now_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                t1 = now_ns()
                k = next(ctr)
                j = k & mask
                st[j] = t0
                en[j] = t1
                try:
                    cd[j] = _TLS.t | name_code
                except AttributeError:
                    cd[j] = current_tid_shifted() | name_code
                sq[j] = k

        return wrapper


if _spanext is not None:
    class _CSpan(_spanext.Span):
        """The C span (`with` in C) plus the Python decorator of `_Span`."""

        __slots__ = ("ring",)

        def __init__(self, ring: Ring, code: int):
            c = ring.cols
            super().__init__(c["start_ns"], c["end_ns"], c["code"], c["seq"], ring.ctr, ring.mask, code)
            self.ring = ring

        @property
        def outer(self) -> list:  # parity with _Span for callers that inspect an idle span
            return [0] * self.open_outer

        def __call__(self, fn):
            return _Span(self.ring, self.code).__call__(fn)


class HostSource:
    """Owns the spans and steps rings and the span-name table."""

    def __init__(self, span_capacity: int, step_capacity: int):
        self.spans = Ring("spans", {"start_ns": "q", "end_ns": "q", "code": "q"}, span_capacity)
        # items/tokens: the step's work as the workload declared it; -1 = not declared.
        self.steps = Ring("steps", {"step_id": "q", "tid": "q", "start_ns": "q", "end_ns": "q",
                                    "items": "q", "tokens": "q"}, step_capacity)
        # Attributes of a few spans (GC collections, checkpoint saves: low rate, Python-side),
        # -1 = not known; the span itself is also in `spans` (tables.py `span_details`).
        self.details = Ring("span_details", {"start_ns": "q", "end_ns": "q", "code": "q", "generation": "q",
                                             "objects": "q", "uncollectable": "q", "bytes": "q"}, DETAIL_CAPACITY)
        self._names: dict[str, int] = {}
        self._name_list: list[str] = []
        self._names_lock = threading.Lock()
        self.names_over_budget = 0
        self.last_repeated_step_ids = 0
        self._tls = threading.local()  # .spans: this thread's name -> _Span (Python path)
        self._lookup = None
        if _spanext is not None:
            # An instance attribute shadows span(): `rec.span` binds to this C callable.
            self._lookup = self.span = _spanext.Lookup(self._make_span, MAX_NAMES)
        self.span_path = SPAN_PATH
        _SOURCES.add(self)

    @property
    def nbytes(self) -> int:
        return self.spans.nbytes + self.steps.nbytes + self.details.nbytes

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
        try:
            return self._tls.spans[name]
        except (AttributeError, KeyError):
            return self._new_span(name)

    def _make_span(self, name: str):
        """The calling thread's new C span for `name` (the C lookup caches it per thread)."""
        return _CSpan(self.spans, current_tid_shifted() | self.name_id(name))

    def _new_span(self, name: str) -> _Span:
        cache = self._tls.__dict__.setdefault("spans", {})
        s = _Span(self.spans, current_tid_shifted() | self.name_id(name))
        if len(cache) < MAX_NAMES:  # bounded like the name table; beyond it, uncached
            cache[name] = s
        return s

    def record_step(self, step_id: int, start_ns: int, end_ns: int, thread_id: int | None = None,
                    items: int = -1, tokens: int = -1) -> None:
        tid = current_tid_shifted() >> NAME_BITS if thread_id is None else thread_id
        self.steps.append(step_id, tid, start_ns, end_ns, items, tokens)

    def record_span(self, name: str, start_ns: int, end_ns: int) -> None:
        """One complete span of the calling thread whose times were taken elsewhere (the
        recorder's between-steps wait). Low rate: once per step, through the ring's append."""
        self.spans.append(start_ns, end_ns, current_tid_shifted() | self.name_id(name))

    def record_detail(self, name: str, start_ns: int, end_ns: int, *, generation: int = -1, objects: int = -1,
                      uncollectable: int = -1, nbytes: int = -1) -> None:
        """A complete span with its attributes, in `spans` and `span_details` (low rate)."""
        code = current_tid_shifted() | self.name_id(name)
        self.spans.append(start_ns, end_ns, code)
        self.details.append(start_ns, end_ns, code, generation, objects, uncollectable, nbytes)

    def details_table(self, copy: RingCopy, since_ns: int, until_ns: int) -> pa.Table:
        c = copy.columns
        keep = (c["end_ns"] >= since_ns) & (c["end_ns"] <= until_ns)
        code = c["code"][keep]
        names = self._name_list + [OVERFLOW_NAME]
        idx = np.minimum(code & MAX_NAMES, len(names) - 1)
        cols = {"name": arrow.strings_at(names, idx), "thread_id": arrow.numbers(code >> NAME_BITS),
                "start_ns": arrow.numbers(c["start_ns"][keep]), "end_ns": arrow.numbers(c["end_ns"][keep])}
        for col in ("generation", "objects", "uncollectable", "bytes"):
            v = c[col][keep]
            cols[col] = arrow.numbers(v, pa.int32() if col == "generation" else pa.int64(), mask=v < 0)
        return arrow.table(cols)

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
        names = self._name_list + [OVERFLOW_NAME]
        name_idx = np.minimum(name_idx, len(names) - 1)
        depth = nesting_depth(tid, start, end)
        return arrow.table({
            "name": arrow.strings_at(names, name_idx),
            "thread_id": arrow.numbers(tid),
            "depth": arrow.numbers(depth, pa.int32()),
            "start_ns": arrow.numbers(start),
            "end_ns": arrow.numbers(end),
        })

    def steps_table(self, copy: RingCopy, since_ns: int, until_ns: int) -> pa.Table:
        c = copy.columns
        keep = (c["end_ns"] >= since_ns) & (c["end_ns"] <= until_ns)
        ids, start, end, tid = c["step_id"][keep], c["start_ns"][keep], c["end_ns"][keep], c["tid"][keep]
        items, tokens = c["items"][keep], c["tokens"][keep]
        # A step id is unique per rank in the contract: if a workload reuses ids (two loops),
        # the latest occurrence is kept and the repeat count is reported by the caller.
        _, last = np.unique(ids[::-1], return_index=True)
        sel = np.sort(len(ids) - 1 - last)
        self.last_repeated_step_ids = int(len(ids) - len(sel))
        return arrow.table({
            "step_id": arrow.numbers(ids[sel]),
            "thread_id": arrow.numbers(tid[sel]),
            "start_ns": arrow.numbers(start[sel]),
            "end_ns": arrow.numbers(end[sel]),
            "items": arrow.numbers(items[sel], mask=items[sel] < 0),
            "tokens": arrow.numbers(tokens[sel], mask=tokens[sel] < 0),
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
