"""The checks, in the order their claims are resolved on the timeline (first claim wins).

Order = most specific cause first: a sync or a declared wait names the reason outright;
launch-bound and host-submission explain what is left of the idle time; throttling and
plain GPU-bound explain busy time.
"""

from __future__ import annotations

from . import clock_throttle, collective_wait, gpu_bound, host_submission, input_starvation, launch_bound, sync_stall

CHECKS = (sync_stall, input_starvation, collective_wait, launch_bound, host_submission, clock_throttle, gpu_bound)
NAMES = tuple(c.NAME for c in CHECKS)
