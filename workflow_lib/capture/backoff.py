"""Back-off: what the recorder slows down when it runs over its CPU target (budget.py's
TargetTracker decides when; this decides what).

Only the thread that costs backs off. The scheduler's periodic all-thread sample is the costly
one (its step-boundary marks, which the diagnosis reads, are unaffected); NVML's poll is cheap
and is the clock/throttle evidence, so it is never slowed for another's cost.
"""

from __future__ import annotations


def back_off(sched, costliest: str | None = None) -> str | None:
    """The action taken (a sentence for the manifest), or None when nothing could back off."""
    src = sched if costliest == "sched" else None
    if src is not None and src.back_off():
        return f"sched period -> {src.period_s} s (costliest recorder thread)"
    return None


def housekeeping(rec) -> None:
    """Once a second on the writer thread: check the recorder's threads and bytes against its targets."""
    threads = {"writer": rec.writer.native_id} | {n: s.native_id for n, s in (("sched", rec.sched), ("nvml", rec.nvml)) if s is not None}
    rec.tracker.check(threads, rec.retained_bytes(), rec._back_off)
