"""The checks, in the order their claims are resolved on the timeline (first claim wins).

Order = most specific cause first: a sync or a declared wait names the reason outright;
launch-bound and host-submission explain what is left of the idle time; throttling and
plain GPU-bound explain busy time.
"""

from __future__ import annotations

from . import (allocator_churn, checkpoint_stall, clock_throttle, collective_wait, compilation, cpu_contention, first_call,
               gc_pause, gpu_bound, gpu_work, host_submission, host_work, input_starvation, kernel_slowdown, launch_bound, sync_stall,
               transfer_stall, warm_up)

# warm_up first (a cold first step is a once-per-process cost: no per-step cause may take it);
# compilation next (a recompile or late autotune is named by its own spans);
# cpu_contention before the rest (measured run-queue wait: a runnable thread that is not running
# stretches whatever it was doing); gc_pause and checkpoint_stall next (a span the capture names
# stops the host: the copies, syncs and allocator calls inside a save are the save's); first_call
# next (a one-time first call of an op, named by its own span or call: the idle it leaves is its
# own, not a sync's refill nor an allocator call's);
# allocator_churn precedes sync_stall (cudaFree is both: the churn is the more specific name);
# transfer_stall precedes sync_stall (a synchronous cudaMemcpy is a sync whose cause is the copy);
# kernel_slowdown takes the time the same kernels ran past their typical length, after
# clock_throttle (which names the clocks) and before the busy-time readings; gpu_work takes the
# busy time gpu_bound (the "bounded by" verdict) did not; host_work is the host-only reading
# when no GPU was observed.
CHECKS = (warm_up, compilation, cpu_contention, gc_pause, checkpoint_stall, first_call, allocator_churn, transfer_stall, sync_stall,
          input_starvation, collective_wait, launch_bound, host_submission, clock_throttle, kernel_slowdown, gpu_bound,
          gpu_work, host_work)
NAMES = tuple(c.NAME for c in CHECKS)
# A finding's `first` claims (kernel_slowdown's held time: the step's launched work waited
# while the GPU ran something else) are credited right after this check, before the checks
# that read idle GPU time as the host's or a call's: a sync or an `.item()` waiting on a GPU
# held by another process did not idle it. Only warm-up and compilation come before.
FIRST_AFTER = "compilation"
