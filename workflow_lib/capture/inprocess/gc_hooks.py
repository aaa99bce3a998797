"""Python GC collections as spans ("gc.collect"), through `gc.callbacks`.

Each collection is a span on the thread that triggered it; a collection of generation 1 or 2,
or one of at least DETAIL_MIN_NS, also gets a `span_details` row with its generation and the
objects collected and found uncollectable. Young collections (generation 0, every few hundred
allocations) are many and short: they stay spans only, so they never push a full collection
out of the bounded detail ring.
"""

from __future__ import annotations

import gc

from ..clock import now_ns

SPAN = "gc.collect"
DETAIL_MIN_NS = 100_000


def install(session) -> list[str]:
    start = [0]

    def callback(phase, info):
        if phase == "start":
            start[0] = now_ns()
            return
        host = session.host()
        if host is None or not start[0]:
            return
        t0, t1 = start[0], now_ns()
        gen = int(info.get("generation", -1))
        if gen >= 1 or t1 - t0 >= DETAIL_MIN_NS:
            host.record_detail(SPAN, t0, t1, generation=gen, objects=int(info.get("collected", -1)),
                               uncollectable=int(info.get("uncollectable", -1)))
        else:
            host.record_span(SPAN, t0, t1)

    gc.callbacks.append(callback)
    return [f"gc.callbacks -> span {SPAN} (generation, collected, uncollectable in span_details)"]
