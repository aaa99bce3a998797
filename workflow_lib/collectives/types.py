"""Typed records of the collectives analysis (persisted as `schemas/collectives.schema.json`).

Version history of the analysis record (bump SCHEMA_VERSION when a field changes meaning):
  1 - first version.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA_VERSION = 1

# Op statuses after matching, most decisive first (an op gets the first that applies).
NOT_JOINED = "not_joined"            # a member rank's dump ends before this op or skips it
MISMATCH = "mismatch"                # present ranks disagree on op type, sizes or dtypes
CANNOT_DECIDE = "cannot_decide"      # a member rank's dump is missing
INCOMPLETE_WINDOW = "incomplete_window"  # evicted from some rank's ring buffer
MATCHED = "matched"                  # every member rank recorded the same op
STATUSES = (NOT_JOINED, MISMATCH, CANNOT_DECIDE, INCOMPLETE_WINDOW, MATCHED)

# Attribution verdicts of one matched op.
ATTRIBUTED = "attributed"            # one late rank, wait above threshold and uncertainty
NOT_ATTRIBUTED = "not_attributed"    # resolved: no wait worth naming (below threshold)
UNRESOLVED = "unresolved"            # cannot say (no comparable times, ambiguous late rank, not matched)

P2P_OPS = frozenset({"send", "recv", "coalesced_p2p"})
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
    """Where one incident's host timeline sits relative to the analysis' reference timeline."""

    incident: str          # incident directory
    group: int             # incidents with the same group are comparable
    offset_ns: int | None  # add to this incident's host ns to get reference ns (None: not comparable)
    uncertainty_ns: int | None  # +/- of that offset
    how: str               # "reference", "same_clock", "same_host_unix", "ref_clock:<name>", "none"
    hostname: str | None
    clock_host: str

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

    def to_json(self) -> dict:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d
