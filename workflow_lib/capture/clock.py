"""The recorder's one host timeline.

Every `*_ns` column the recorder writes is `time.monotonic_ns()` (CLOCK_MONOTONIC on
Linux; `time.perf_counter_ns()` reads the same clock there but is not promised to on
other systems, so the recorder never mixes them). The manifest says `clock.host =
"monotonic"` and gives `unix_minus_host_ns` so readers can line times up with Unix time
(Kineto traces, NVML driver samples).
"""

from __future__ import annotations

import time

now_ns = time.monotonic_ns
HOST_CLOCK = "monotonic"


def unix_minus_host_ns(reads: int = 5) -> tuple[int, int]:
    """(offset, uncertainty) with unix_ns = host_ns + offset.

    Bracketed reads: monotonic, realtime, monotonic; the tightest bracket wins and its
    half-width is the uncertainty.
    """
    best = None
    for _ in range(max(1, reads)):
        a = time.monotonic_ns()
        u = time.time_ns()
        b = time.monotonic_ns()
        width = b - a
        if best is None or width < best[1]:
            best = (u - (a + b) // 2, width)
    offset, width = best
    return offset, (width + 1) // 2
