"""Typed records of the collectives analysis (persisted as `schemas/collectives.schema.json`).

Version history of the analysis record (bump SCHEMA_VERSION when a field changes meaning):
  1 - first version.
  2 - `culprits` and `hung_on` at the top; per op `progress` and per-rank `state`; status
      `joined_by_counter`; attribution verdict `pending` (a hang state, never a wait);
      clock domains per rank (`rank`, `hostname`, uncertainty null = not comparable);
      per rank the dump's pg_status counters. Version 1 records stay readable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..core.vocabulary import P2P_OPS  # noqa: F401  (one definition, in the vocabulary; re-exported for the stage)

SCHEMA_VERSION = 2

# Op statuses after matching, most decisive first (an op gets the first that applies).
NOT_JOINED = "not_joined"            # a member rank's dump ends before this op or skips it
MISMATCH = "mismatch"                # present ranks disagree on op type, sizes or dtypes
CANNOT_DECIDE = "cannot_decide"      # a member rank's dump is missing
INCOMPLETE_WINDOW = "incomplete_window"  # evicted from some rank's ring buffer, counters cannot say more
JOINED_BY_COUNTER = "joined_by_counter"  # some member's record is gone, but its pg_status shows it enqueued it
MATCHED = "matched"                  # every member rank recorded the same op
STATUSES = (NOT_JOINED, MISMATCH, CANNOT_DECIDE, INCOMPLETE_WINDOW, JOINED_BY_COUNTER, MATCHED)

# What one member rank's dump says about one op (most advanced wins: entry or counter).
NO_DUMP, UNKNOWN, NOT_ENQUEUED, SCHEDULED, STARTED, COMPLETED = range(6)
STATE_NAMES = ("no_dump", "unknown", "not_enqueued", "scheduled", "started", "completed")
ENTRY_STATE = {"scheduled": SCHEDULED, "started": STARTED, "completed": COMPLETED}

# Progress of an op over its members: only a `completed` op can carry a measured wait.
PROGRESS_COMPLETED = "completed"     # every member that can testify completed it
PROGRESS_PARTIAL = "partial"         # some completed it, others are still pending or never enqueued it
PROGRESS_PENDING = "pending"         # no member completed it: a hang state
PROGRESSES = (PROGRESS_COMPLETED, PROGRESS_PARTIAL, PROGRESS_PENDING)

# Culprit kinds, the most decisive first.
NEVER_JOINED = "never_joined"        # its dump (and counters) show it never enqueued the op the others wait in
STUCK_ON_DEVICE = "stuck_on_device"  # pending here while peers completed the op: this rank's GPU did not finish
MISSING_DUMP = "missing_dump"        # no dump: it may be the one, nothing can tell
LATE = "late"                        # a straggler that completed: others waited on it (measured)
CULPRIT_KINDS = (NEVER_JOINED, STUCK_ON_DEVICE, MISSING_DUMP, LATE)
HANG_KINDS = (NEVER_JOINED, STUCK_ON_DEVICE, MISSING_DUMP)

# Attribution verdicts of one matched op.
ATTRIBUTED = "attributed"            # one late rank, wait above threshold and uncertainty
NOT_ATTRIBUTED = "not_attributed"    # resolved: no wait worth naming (below threshold)
UNRESOLVED = "unresolved"            # cannot say (no comparable times, ambiguous late rank, not matched)
PENDING = "pending"                  # not every member completed the op: a hang state, no wait is measured

# Ops whose per-rank sizes legitimately differ (torch's analyzer exempts the same ones).
INPUT_SIZES_FREE = frozenset({"all_to_all", "all_to_all_single", "all_to_all_v_single", "scatter",
                              "all_gather_v", "reduce_scatter_v", "coalesced"})
OUTPUT_SIZES_FREE = frozenset({"all_to_all", "all_to_all_single", "all_to_all_v_single", "gather",
                               "all_gather_v", "reduce_scatter_v", "coalesced"})


@dataclass(frozen=True)
class Options:
    """Thresholds of the analysis; each documented where it is used."""

    # Below this a wait is launch/driver jitter, not a late rank worth naming (1 ms is
    # ~50x the arrival jitter seen between two H200 ranks of one host).
    min_wait_ns: int = 1_000_000
    # Uncertainty of a wait computed from two ranks' CUDA-event durations: event
    # resolution (~0.5 us) plus NCCL's own transfer-time spread between ranks.
    duration_uncertainty_ns: int = 50_000
    # Uncertainty added when comparing CLOCK_REALTIME with CLOCK_MONOTONIC of one host
    # through unix_minus_host_ns: NTP may slew realtime by up to ~10 ppm over a capture.
    same_host_conversion_uncertainty_ns: int = 1_000_000
    # How far before the late rank's enqueue to look at its host (beyond the wait).
    host_context_margin_ns: int = 0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ClockDomain:
    """Where one rank's host timeline sits relative to its comparability group's reference."""

    incident: str          # incident directory
    group: int             # ranks with the same group are comparable
    offset_ns: int | None  # add to this rank's host ns to get the group's reference ns
    uncertainty_ns: int | None  # +/- of that offset
    how: str               # "reference", "same_clock", "same_host_unix", "ref_clock:<name>"
    hostname: str | None   # None: unknown host (a dump says nothing of its host)
    clock_host: str
    rank: int | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RankSource:
    """One rank's dump as loaded: which incident it came from and whether its buffer wrapped."""

    rank: int
    incident: str
    wrapped: bool
    records: int
    kernel_only: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    # group name -> {pg_id, last_enqueued, last_started, last_completed, mapped_by} (pg_status)
    counters: dict = field(default_factory=dict)
    hostname: str | None = None
    pending_only: bool = False
    dump_version: str | None = None

    def to_json(self) -> dict:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d
