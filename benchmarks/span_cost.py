"""Span hot-path variants, measured side by side: which way of recording a span is cheapest.

    python benchmarks/span_cost.py [--rounds 201] [--n 5000] [--json OUT.json]

Each variant records into a real preallocated `Ring` (same columns, same commit mark) and
keeps what a span must keep: thread id, monotonic start/end, the name, a commit sequence.
Rounds interleave every variant in shuffled order, so host drift (other tenants, clocks)
hits them alike; a variant's cost is the median over rounds of its per-iteration time,
and its added cost is the median over rounds of (variant - bare clock pair of the same
round). The bare pair is two `time.monotonic_ns()` calls in the same loop shape. Samples
are timed in thread CPU time (`time.thread_time_ns`), which excludes preemption by other
tenants of a shared host; on a quiet host it equals wall time.

Variants (`with span("x"): pass`, the lookup included, as a workload writes it):
  v0_tls_stack    the committed design before this change: one span object per name, start
                  times on a thread-local stack, ring attributes loaded per span;
  v1_refs         v0 with the ring's arrays, mask and counter kept on the span object;
  v2_thread_objs  one span object per (thread, name) holding its own start stack and the
                  precombined thread|name code; arrays and counter on the object;
  v3_thread_objs_scalar  v2 with the start time in a slot while not re-entered (a list
                  only for recursion);
  v1d_refs_dict_lookup  v1 with `span` bound to a dict's C-level __getitem__ (a dict
                  subclass whose __missing__ makes the object): no Python frame for the lookup;
  v4_packed_commit  v3 without the seq store: the ring generation packed into the code
                  column's high bits as the commit mark (one store less, two int ops more);
  v5_thread_objs_pack  v3 writing the row with one `struct.pack_into` into a row-major
                  bytearray (seq last) instead of four `array.array` item stores;
  v6_dict_lookup_pack  v1d (shared object, C-level lookup, thread-local start stack) with
                  v5's single-call row store;
  v7_floor_no_guard  v3 without its recursion guard: not correct, a floor for the design;
  v8_thread_objs_ctypes  v3 with ctypes int64 columns instead of array.array;
  v9_dict_lookup_ctypes  v1d with ctypes columns (a span object any thread may hold);
  v10_closure_lookup  v8 with the lookup as a closure over the thread-local (no bound
                  method, one attribute load less);
  v11_start_in_lookup  rejected (wrong for held objects): the lookup takes the start time
                  and __enter__ is a C no-op;
  v12_list_columns  rejected (4x bytes per span, storage not preallocated): v3 with
                  Python-list columns;
  with_floor      a `with` on a Python object whose __enter__/__exit__ do nothing: the
                  floor under any Python-level context manager;
  bare_pair_perf_counter  two `time.perf_counter_ns()` calls (the reference
                  recorder_overhead.py uses);
  shipped_with    what host.py ships: the C span (`_spanext`) where it was built;
  shipped_with_python  host.py's pure-Python span (the fallback without a compiler).
Decorator variants (a call of a decorated no-op function, minus a plain call):
  d0_nested_with  wrapper runs `with span:` around the call (v0);
  (d1, the wrapper keeping its start in a local, was adopted: it is what
                  shipped_decorator measures, from workflow_lib itself.)
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import platform
import random
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from workflow_lib.capture.ring import Ring  # noqa: E402
from workflow_lib.compare.stats import hodges_lehmann  # noqa: E402
from workflow_lib.capture.sources import host as host_mod  # noqa: E402

now_ns = time.monotonic_ns
NAME_BITS = 20
# Samples are timed in this thread's CPU time: on a shared host, wall time of a sample
# includes the time slices other tenants took, which grows with the sample's length and
# so penalizes the slower variants unevenly. CPU time of the thread excludes preemption.
_clock = time.thread_time_ns


def _ring(cap: int = 1 << 16) -> Ring:
    return Ring("spans", {"start_ns": "q", "end_ns": "q", "code": "q"}, cap)


# ---- v0: the committed design before this change ----------------------------------------
_TLS0 = threading.local()


def _tid0() -> int:
    try:
        return _TLS0.t
    except AttributeError:
        t = _TLS0.t = threading.get_native_id() << NAME_BITS
        return t


class _SpanV0:
    __slots__ = ("ring", "code")

    def __init__(self, ring, code):
        self.ring, self.code = ring, code

    def __enter__(self):
        try:
            _TLS0.stack.append(now_ns())
        except AttributeError:
            _tid0()
            _TLS0.stack = [now_ns()]
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        tls = _TLS0
        t0 = tls.stack.pop()
        r = self.ring
        k = next(r.ctr)
        j = k & r.mask
        r.cols["start_ns"][j] = t0  # v0 used direct ring attributes; same loads as below
        r.cols["end_ns"][j] = t1
        r.cols["code"][j] = tls.t | self.code
        r.seq[j] = k
        return False

    def __call__(self, fn):
        span = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with span:
                return fn(*args, **kwargs)

        return wrapper


class _SpanV0Attrs(_SpanV0):
    """v0 exactly: the ring carries st/en/cd attributes (one attribute load each)."""

    __slots__ = ()

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        tls = _TLS0
        t0 = tls.stack.pop()
        r = self.ring
        k = next(r.ctr)
        j = k & r.mask
        r.st[j] = t0
        r.en[j] = t1
        r.cd[j] = tls.t | self.code
        r.seq[j] = k
        return False


class _SpanV1:
    __slots__ = ("st", "en", "cd", "sq", "ctr", "mask", "code")

    def __init__(self, ring, code):
        c = ring.cols
        self.st, self.en, self.cd, self.sq = c["start_ns"], c["end_ns"], c["code"], c["seq"]
        self.ctr, self.mask, self.code = ring.ctr, ring.mask, code

    def __enter__(self):
        try:
            _TLS0.stack.append(now_ns())
        except AttributeError:
            _tid0()
            _TLS0.stack = [now_ns()]
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        tls = _TLS0
        t0 = tls.stack.pop()
        k = next(self.ctr)
        j = k & self.mask
        self.st[j] = t0
        self.en[j] = t1
        self.cd[j] = tls.t | self.code
        self.sq[j] = k
        return False


class _SpanV2:
    """Per (thread, name): its own start stack and the thread|name code precombined."""

    __slots__ = ("st", "en", "cd", "sq", "ctr", "mask", "code", "t0s")

    def __init__(self, ring, code):
        c = ring.cols
        self.st, self.en, self.cd, self.sq = c["start_ns"], c["end_ns"], c["code"], c["seq"]
        self.ctr, self.mask, self.code = ring.ctr, ring.mask, code
        self.t0s = []

    def __enter__(self):
        self.t0s.append(now_ns())
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        k = next(self.ctr)
        j = k & self.mask
        self.st[j] = self.t0s.pop()
        self.en[j] = t1
        self.cd[j] = self.code
        self.sq[j] = k
        return False


class _SpanV3:
    """v2 with the start in a slot; a list only while re-entered (recursion)."""

    __slots__ = ("st", "en", "cd", "sq", "ctr", "mask", "code", "t0", "outer")

    def __init__(self, ring, code):
        c = ring.cols
        self.st, self.en, self.cd, self.sq = c["start_ns"], c["end_ns"], c["code"], c["seq"]
        self.ctr, self.mask, self.code = ring.ctr, ring.mask, code
        self.t0 = -1
        self.outer = []

    def __enter__(self):
        if self.t0 >= 0:
            self.outer.append(self.t0)
        self.t0 = now_ns()
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        k = next(self.ctr)
        j = k & self.mask
        self.st[j] = self.t0
        self.t0 = self.outer.pop() if self.outer else -1
        self.en[j] = t1
        self.cd[j] = self.code
        self.sq[j] = k
        return False


class _SpanV4(_SpanV3):
    """v3 without the seq store: the commit mark is packed into the code column as the
    ring generation (k >> log2(capacity)) in the high 31 bits."""

    __slots__ = ("shift",)

    def __init__(self, ring, code):
        super().__init__(ring, code)
        self.shift = ring.capacity.bit_length() - 1

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        k = next(self.ctr)
        j = k & self.mask
        self.st[j] = self.t0
        self.t0 = self.outer.pop() if self.outer else -1
        self.en[j] = t1
        self.cd[j] = self.code | (k >> self.shift) << 32
        return False


_ROW = struct.Struct("<4q")  # start, end, code, seq: one row, seq last (the commit mark)


class _SpanV5:
    """v3 storing the row with one `struct.pack_into` into a row-major bytearray: one C call
    converts and writes four int64s (array.array's item store parses each value with
    PyArg_Parse, ~30 ns a store)."""

    __slots__ = ("buf", "pack", "ctr", "mask", "code", "t0", "outer")

    def __init__(self, ring, code):
        self.buf = bytearray(_ROW.size * ring.capacity)
        self.pack, self.ctr, self.mask, self.code = _ROW.pack_into, ring.ctr, ring.mask, code
        self.t0 = -1
        self.outer = []

    def __enter__(self):
        if self.t0 >= 0:
            self.outer.append(self.t0)
        self.t0 = now_ns()
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        k = next(self.ctr)
        self.pack(self.buf, (k & self.mask) << 5, self.t0, t1, self.code, k)
        self.t0 = self.outer.pop() if self.outer else -1
        return False


class _SpanV6:
    """Shared per name (dict-bound lookup) with the thread-local start stack, storing with
    one `pack_into` (v1d + v5's store)."""

    __slots__ = ("buf", "pack", "ctr", "mask", "code")

    def __init__(self, ring, code):
        self.buf = bytearray(_ROW.size * ring.capacity)
        self.pack, self.ctr, self.mask, self.code = _ROW.pack_into, ring.ctr, ring.mask, code

    def __enter__(self):
        try:
            _TLS0.stack.append(now_ns())
        except AttributeError:
            _tid0()
            _TLS0.stack = [now_ns()]
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        tls = _TLS0
        k = next(self.ctr)
        self.pack(self.buf, (k & self.mask) << 5, tls.stack.pop(), t1, tls.t | self.code, k)
        return False


class _SpanV7:
    """A floor, not a candidate: v3 without the recursion guard (wrong when a name
    re-enters itself on one thread). Shows what the guard costs."""

    __slots__ = ("st", "en", "cd", "sq", "ctr", "mask", "code", "t0")

    def __init__(self, ring, code):
        c = ring.cols
        self.st, self.en, self.cd, self.sq = c["start_ns"], c["end_ns"], c["code"], c["seq"]
        self.ctr, self.mask, self.code = ring.ctr, ring.mask, code

    def __enter__(self):
        self.t0 = now_ns()
        return self

    def __exit__(self, et, ev, tb):
        t1 = now_ns()
        k = next(self.ctr)
        j = k & self.mask
        self.st[j] = self.t0
        self.en[j] = t1
        self.cd[j] = self.code
        self.sq[j] = k
        return False


class _SpanV8(_SpanV3):
    """v3 with the columns as ctypes int64 arrays: their item store converts with
    PyLong_AsLongLong-style calls, not array.array's PyArg_Parse."""

    __slots__ = ()

    def __init__(self, ring, code):
        super().__init__(ring, code)
        cap = ring.capacity
        self.st, self.en, self.cd, self.sq = ((ctypes.c_int64 * cap)() for _ in range(4))


class _SpanV9(_SpanV1):
    """v1d with ctypes columns: shared per name (any thread may hold it), C-level lookup,
    thread-local start stack."""

    __slots__ = ()

    def __init__(self, ring, code):
        super().__init__(ring, code)
        cap = ring.capacity
        self.st, self.en, self.cd, self.sq = ((ctypes.c_int64 * cap)() for _ in range(4))


class _Lookup(dict):
    """Name -> shared span object; `span` is bound to this dict's C-level __getitem__."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, name):
        s = self[name] = self.make(name)
        return s


class _Floor:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        return False


class _Source:
    """Name -> span object; per-name (shared) or per-(thread, name) like the variants need."""

    def __init__(self, cls, per_thread: bool):
        self.ring = _ring()
        self.cls, self.cache, self.tls = cls, {}, threading.local()
        self.span = self._per_thread if per_thread else self._shared

    def _shared(self, name):
        s = self.cache.get(name)
        if s is None:
            s = self.cache[name] = self.cls(self.ring, 1)
        return s

    def _per_thread(self, name):
        try:
            return self.tls.d[name]
        except (AttributeError, KeyError):
            d = self.tls.__dict__.setdefault("d", {})
            s = d[name] = self.cls(self.ring, (threading.get_native_id() << NAME_BITS) | 1)
            return s


def _v1_dict_lookup():
    ring = _ring()
    return _Lookup(lambda name: _SpanV1(ring, 1)).__getitem__


def _v9_dict_lookup():
    ring = _ring()
    return _Lookup(lambda name: _SpanV9(ring, 1)).__getitem__


def _v6_dict_lookup():
    ring = _ring()
    return _Lookup(lambda name: _SpanV6(ring, 1)).__getitem__


def _v10_closure_lookup():
    """v8 objects; the lookup is a plain function closing over the thread-local (no bound
    method, no attribute load for the local)."""
    ring = _ring()
    tls = threading.local()

    def span(name):
        try:
            return tls.spans[name]
        except (AttributeError, KeyError):
            d = tls.__dict__.setdefault("spans", {})
            s = d[name] = _SpanV8(ring, (threading.get_native_id() << NAME_BITS) | 1)
            return s

    return span


class _SpanV11(_SpanV8):
    """Rejected design, measured for the record: the lookup takes the start time and
    __enter__ is a C no-op (one Python frame less). Wrong for a span object held and
    entered later, or looked up without being entered."""

    __slots__ = ()
    __enter__ = staticmethod(tuple)


def _v11_start_in_lookup():
    ring = _ring()
    tls = threading.local()

    def span(name):
        try:
            s = tls.spans[name]
        except (AttributeError, KeyError):
            d = tls.__dict__.setdefault("spans", {})
            s = d[name] = _SpanV11(ring, (threading.get_native_id() << NAME_BITS) | 1)
        if s.t0:
            s.outer.append(s.t0)
        s.t0 = now_ns()
        return s

    return span


class _SpanV12(_SpanV3):
    """Rejected design, measured for the record: v3 storing into preallocated Python lists.
    A list store skips the int64 conversion, but each slot then keeps an int object alive
    (~36 bytes beside the 8-byte slot): ~4x the bytes per span, and not preallocated."""

    __slots__ = ()

    def __init__(self, ring, code):
        super().__init__(ring, code)
        cap = ring.capacity
        self.st, self.en, self.cd, self.sq = ([0] * cap for _ in range(4))


def _v0_attrs_source():
    src = _Source(_SpanV0Attrs, False)
    src.ring.st, src.ring.en, src.ring.cd = (src.ring.cols[c] for c in ("start_ns", "end_ns", "code"))
    return src


def _loop_with(span, n: int) -> float:
    pc = _clock
    t0 = pc()
    for _ in range(n):
        with span("x"):
            pass
    return (pc() - t0) / n


def _loop_bare(n: int) -> float:
    pc = _clock
    mn = now_ns
    t0 = pc()
    for _ in range(n):
        mn()
        mn()
    return (pc() - t0) / n


def _loop_bare_pc(n: int) -> float:
    pc = _clock
    mn = time.perf_counter_ns
    t0 = pc()
    for _ in range(n):
        mn()
        mn()
    return (pc() - t0) / n


def _loop_call(f, n: int) -> float:
    pc = _clock
    t0 = pc()
    for _ in range(n):
        f()
    return (pc() - t0) / n


def _noop():
    return None


def _python_host():
    """host.py's HostSource on its pure-Python span path, whether or not the C one is built."""
    ext = host_mod._spanext
    host_mod._spanext = None
    try:
        return host_mod.HostSource(1 << 16, 16)
    finally:
        host_mod._spanext = ext


def variants() -> dict:
    """name -> zero-argument maker of a function `n -> ns per iteration`."""
    floor = _Floor()
    out = {
        "bare_pair": lambda: _loop_bare,
        "with_floor": lambda: functools.partial(_loop_with, lambda name: floor),
        "v0_tls_stack": lambda: functools.partial(_loop_with, _v0_attrs_source().span),
        "v1_refs": lambda: functools.partial(_loop_with, _Source(_SpanV1, False).span),
        "v1d_refs_dict_lookup": lambda: functools.partial(_loop_with, _v1_dict_lookup()),
        "v2_thread_objs": lambda: functools.partial(_loop_with, _Source(_SpanV2, True).span),
        "v3_thread_objs_scalar": lambda: functools.partial(_loop_with, _Source(_SpanV3, True).span),
        "v4_packed_commit": lambda: functools.partial(_loop_with, _Source(_SpanV4, True).span),
        "v5_thread_objs_pack": lambda: functools.partial(_loop_with, _Source(_SpanV5, True).span),
        "v6_dict_lookup_pack": lambda: functools.partial(_loop_with, _v6_dict_lookup()),
        "v7_floor_no_guard": lambda: functools.partial(_loop_with, _Source(_SpanV7, True).span),
        "v8_thread_objs_ctypes": lambda: functools.partial(_loop_with, _Source(_SpanV8, True).span),
        "v9_dict_lookup_ctypes": lambda: functools.partial(_loop_with, _v9_dict_lookup()),
        "v10_closure_lookup": lambda: functools.partial(_loop_with, _v10_closure_lookup()),
        "v11_start_in_lookup": lambda: functools.partial(_loop_with, _v11_start_in_lookup()),
        "v12_list_columns": lambda: functools.partial(_loop_with, _Source(_SpanV12, True).span),
        "plain_call": lambda: functools.partial(_loop_call, _noop),
        "d0_nested_with": lambda: functools.partial(_loop_call, _v0_attrs_source().span("f")(_noop)),
    }
    # What the library ships now (host.py): measured beside the variants it was chosen from.
    shipped = host_mod.HostSource(1 << 16, 16)
    out["bare_pair_perf_counter"] = lambda: _loop_bare_pc
    out["shipped_with"] = lambda: functools.partial(_loop_with, shipped.span)
    out["shipped_with_python"] = lambda: functools.partial(_loop_with, _python_host().span)
    out["shipped_decorator"] = lambda: functools.partial(_loop_call, shipped.span("f")(_noop))
    return out


def measure(rounds: int, n: int, only: list[str] | None = None) -> dict:
    makers = variants()
    names = [v for v in makers if only is None or v in only or v in ("bare_pair", "plain_call")]
    fns = {v: makers[v]() for v in names}
    per: dict[str, list[float]] = {v: [] for v in names}
    for v in names:  # warm every path once (caches, first-use slow paths)
        fns[v](1000)
    for _ in range(rounds):
        order = names[:]
        random.shuffle(order)
        for v in order:
            per[v].append(fns[v](n))
    bare, call = per["bare_pair"], per["plain_call"]
    res = {}
    for v in names:
        ref = call if v.startswith("d") or v == "shipped_decorator" else bare
        added = [a - b for a, b in zip(per[v], ref)]
        # The minimum over rounds is the least-disturbed sample: on a shared host it is the
        # steadier estimate of intrinsic cost; the median says what a loaded host sees.
        est, lo, hi = hodges_lehmann(np.asarray(added), 0.95)
        res[v] = {"median_ns": statistics.median(per[v]), "added_ns": statistics.median(added),
                  "added_hl_ns": float(est), "added_ci95_ns": [float(lo), float(hi)],
                  "min_ns": min(per[v]), "added_min_ns": min(per[v]) - min(ref),
                  "ratio_to_bare_pair": statistics.median(per[v]) / statistics.median(bare),
                  "reference": "plain_call" if ref is call else "bare_pair"}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=201)
    ap.add_argument("--n", type=int, default=5_000, help="iterations per variant per round")
    ap.add_argument("--only", nargs="*", default=None, help="variant names (bare_pair and plain_call always run)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.n = 3, 200
    res = measure(args.rounds, args.n, args.only)
    meta = {"machine": {"node": platform.node(), "processor": platform.processor() or platform.machine(),
                        "cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_1min": os.getloadavg()[0]},
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rounds": args.rounds, "n": args.n}
    meta["span_path"] = host_mod.SPAN_PATH
    print(f"{meta['date_utc']} span path {host_mod.SPAN_PATH} python {meta['machine']['python']} load {meta['machine']['load_1min']:.2f}; "
          f"{args.rounds} rounds x {args.n}")
    for v, r in res.items():
        print(f"{v:22s} median {r['median_ns']:6.0f} ns (added {r['added_ns']:5.0f})  min {r['min_ns']:6.0f} ns "
              f"(added {r['added_min_ns']:5.0f}) over {r['reference']:10s} ratio/bare {r['ratio_to_bare_pair']:.2f}  "
              f"added HL {r['added_hl_ns']:5.0f} [{r['added_ci95_ns'][0]:.0f}, {r['added_ci95_ns'][1]:.0f}]")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "variants": res}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
