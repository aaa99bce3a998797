"""Python GC collections as spans ("gc.collect"), through `gc.callbacks`.

Each collection is a span on the thread that triggered it; a collection of generation 1 or 2
also gets a `span_details` row with its generation and the objects collected and found
uncollectable. Young collections (generation 0, every few hundred allocations) are many and
short: they are spans only, through the C span path (a few hundred ns), so they cost little
and never push a full collection out of the bounded detail ring.
"""

from __future__ import annotations

import gc

from ..clock import now_ns

SPAN = "gc.collect"


def install(session) -> list[str]:
    state = {"t0": 0, "span": None}

    def callback(phase, info):
        gen = info.get("generation", -1)
        if phase == "start":
            if gen >= 1:  # its details: times taken here, written at stop
                state["t0"], state["span"] = now_ns(), None
            else:  # young: the C span path (a few hundred ns)
                state["t0"], state["span"] = 0, session.span(SPAN)
                state["span"].__enter__()
            return
        span, t0 = state["span"], state["t0"]
        state["span"], state["t0"] = None, 0
        if span is not None:
            span.__exit__(None, None, None)
            return
        host = session.host()
        if host is not None and t0:
            host.record_detail(SPAN, t0, now_ns(), generation=int(gen), objects=int(info.get("collected", -1)),
                               uncollectable=int(info.get("uncollectable", -1)))

    gc.callbacks.append(callback)
    return [f"gc.callbacks -> span {SPAN} (generation 1 and 2: generation, collected, uncollectable in span_details)"]
