"""Typed records of the diagnosis stage. Units are in field names; every field has a doc line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

VERDICTS = ("attributed", "unresolved", "not_applicable")

# Names a dataloader/queue wait tends to carry (torch DataLoader's record_function is
# "enumerate(DataLoader)#_...Iter.__next__"); matched case-insensitively anywhere in a span name.
DEFAULT_WAIT_PATTERNS = (
    r"queue", r"dataloader", r"data_wait", r"next[ _]?batch", r"get_batch",
    r"wait_for_data", r"prefetch", r"_next_data",
    # The recorder's gap before a step's block (capture/recorder.py): in the README's
    # `for i, batch in enumerate(loader): with rec.step(i):` loop that is the loader's next().
    r"^between_steps$",
)


@dataclass(frozen=True)
class DiagnoseOptions:
    """Knobs of the diagnosis; every default is justified beside it."""

    step_pattern: str | None = None
    """Regex over span names whose matches become steps (one group = step id) when the incident
    has no steps table or to override it; None uses the steps table."""
    wait_patterns: tuple[str, ...] = DEFAULT_WAIT_PATTERNS
    """Regexes (case-insensitive) naming declared wait spans: host time in them is input wait."""
    gpu_bound_min_busy_fraction: float = 0.9
    """busy/wall at or above this is GPU-bound: the last 10% is launch latency and step edges
    that no host-side change removes."""
    min_gap_ns: int = 10_000
    """GPU idle shorter than this is ignored by gap-based checks: back-to-back kernels on H200
    leave 1-5 us between them even when the queue is full (launch latency)."""
    clock_uncertainty_max_fraction: float = 0.1
    """A gap is attributed to the host only when the GPU->host clock uncertainty is below this
    fraction of the gap: otherwise the gap's edges are not known well enough to say which host
    span it fell in."""
    launch_bound_min_kernels: int = 50
    """Fewer kernels per step are not 'many': a handful of short kernels cannot bound a step."""
    launch_bound_min_short_fraction: float = 0.5
    """Fraction of kernels that must run shorter than their own launch call."""
    launch_bound_min_host_launch_fraction: float = 0.5
    """Fraction of the step the submitting thread must spend inside launch calls
    ('continuously in launch calls' with room for Python between calls)."""
    throttle_clock_fraction: float = 0.95
    """SM clock below this fraction of its maximum while busy counts as throttled: boost
    clocks wander by a few percent without any clock-event reason set."""
    max_gaps_listed: int = 5
    """Longest gaps listed per step (all gaps are counted and summed); the record is validated
    node by node, so each listed gap costs write time on runs of thousands of steps."""

    def wait_regex(self) -> re.Pattern:
        return re.compile("|".join(f"(?:{p})" for p in self.wait_patterns), re.IGNORECASE)

    def as_record(self) -> dict:
        return {
            "step_pattern": self.step_pattern,
            "wait_patterns": list(self.wait_patterns),
            "gpu_bound_min_busy_fraction": self.gpu_bound_min_busy_fraction,
            "min_gap_ns": self.min_gap_ns,
            "clock_uncertainty_max_fraction": self.clock_uncertainty_max_fraction,
            "launch_bound_min_kernels": self.launch_bound_min_kernels,
            "launch_bound_min_short_fraction": self.launch_bound_min_short_fraction,
            "launch_bound_min_host_launch_fraction": self.launch_bound_min_host_launch_fraction,
            "throttle_clock_fraction": self.throttle_clock_fraction,
            "max_gaps_listed": self.max_gaps_listed,
        }


@dataclass(frozen=True)
class Intervals:
    """Disjoint, sorted [start_ns, end_ns) intervals (the result of a union)."""

    start_ns: np.ndarray
    """int64 starts, ascending."""
    end_ns: np.ndarray
    """int64 ends; end_ns[i] <= start_ns[i+1]."""

    @property
    def total_ns(self) -> int:
        return int((self.end_ns - self.start_ns).sum())

    def __len__(self) -> int:
        return int(self.start_ns.size)


@dataclass(frozen=True)
class StepWindow:
    """One step as the checks see it."""

    step_id: int
    """Workload step id (unique per rank)."""
    rank: int | None
    """Distributed rank, None for single-process work."""
    thread_id: int
    """Host thread that owns the step."""
    start_ns: int
    """Step start on the incident's host timeline."""
    end_ns: int
    """Step end."""

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class Finding:
    """One check's answer for one step."""

    check: str
    """Check name (gpu_bound, host_submission, ...)."""
    verdict: str
    """attributed | unresolved | not_applicable."""
    claimed: Intervals
    """Timeline intervals this finding would explain before overlap with other findings is resolved."""
    evidence: dict = field(default_factory=dict)
    """What the verdict rests on (JSON-ready)."""
    missing: tuple[str, ...] = ()
    """Evidence that would be needed and is absent (empty when attributed)."""
