"""Typed records of the diagnosis stage. Units are in field names; every field has a doc line."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np

from ..core import typed

# Version history of the diagnosis record (schemas/diagnosis.schema.json): 1 first version;
# 2 excess attribution (optional fields: readers treat them absent as not available);
# 3 per-step results as two Parquet tables beside the record (`step_tables`; issue 26,
# diagnose/step_tables.py, diagnose/stored.py); 4 where each finding sits on its step's timeline
# (findings[].at, diagnose/places.py: the report draws it there), required on the slow steps'
# findings. Versions 1-3 still read (stored.load_diagnosis; 3 -> 4 in core/records.upgrade).
DIAGNOSIS_VERSION = 4
# diagnose() builds the record with its steps inline, step by step: the version-2 shape, which
# every writer stores as version 3 (stored.write_diagnosis) and every reader reads as one shape.
INLINE_STEPS_VERSION = 2

@typed.record("diagnosis", version=DIAGNOSIS_VERSION)
class DiagnosisRecord:
    """diagnosis.json: the summary of a diagnosis and the per-step tables it names (stored.py writes
    it last, after the tables; load_diagnosis reads it with them into a Diagnosis)."""

    incident_id: str = typed.doc("the incident diagnosed")
    snapshot_digest: str = typed.doc("blake3 digest of the incident's snapshot record")
    options: dict = typed.doc("the DiagnoseOptions used (thresholds, patterns)")
    sources: dict = typed.doc("which evidence the incident observed, and why not where it did not")
    checks: list = typed.doc("the checks run, in timeline-priority order")
    summary: DiagnosisSummary = typed.doc("slow steps with their findings, totals by check, warm-up, the job (summary.job)")
    next_experiments: list = typed.doc("candidate changes ranked by what each could recover, bounded on the timeline")
    step_tables: dict = typed.doc("name -> {file, digest, rows} of the two Parquet tables beside the record")
    collectives: dict = typed.doc("the collectives analysis, for an incident of flight-recorder dumps alone",
                                  optional=True)
    steps: list = typed.doc("versions 1 and 2 only: the steps inline (version 3 keeps them in step_tables)",
                            optional=True)


# The parts of the record its readers use, typed (schemas/diagnosis.schema.json's summary and
# next_experiments). The summary is made as its class (record.summary_of) and written through
# DiagnosisRecord (stored.record_of), so writer and readers share one type. stored.Diagnosis reads them (Diagnosis.summary, .next_experiments) from the
# record as stored.load_diagnosis / as_diagnosis upgraded it, the one place older versions are
# read: a version-1 record's summary has no slow steps (ABSENT), a version-2 one's slow steps get
# their findings there. tests/test_typed_records.py holds each class and its subschema in sync.

@typed.nested
class Grew:
    """The kernels and host spans whose time in a slow step grew most over comparable steps."""

    kernels_ns: dict = typed.doc("kernel name -> ns grown over its median in comparable steps", optional=True)
    host_spans_ns: dict = typed.doc("host span name -> ns grown", optional=True)


@typed.nested
class SlowStep:
    """A slow step with its excess over the typical step, split by cause."""

    rank: int | None = typed.doc("the step's rank (null: one process)")
    step_id: int = typed.doc("the step")
    wall_ns: int = typed.doc("the step's wall time")
    typical_ns: int = typed.doc("the typical wall of comparable steps")
    excess_ns: int = typed.doc("wall_ns - typical_ns")
    by_cause: dict = typed.doc("check -> ns of the excess it explains")
    unexplained_ns: int = typed.doc("the excess no check explains")
    grew: Grew = typed.doc("what grew most in the step", optional=True)
    findings: list = typed.doc("the step's findings (version 2 records: copied from its step on read)", optional=True)


@typed.nested
class WarmUp:
    """The cold first steps of the process, said once and apart from the ranked experiments."""

    steps: int = typed.doc("how many steps were cold")
    step_ids: list = typed.doc("the cold steps")
    wall_ns: int = typed.doc("their wall time together")
    over_typical_ns: int = typed.doc("their wall over the typical step's")
    once_per_process: bool = typed.doc("always true: the cost is paid once per process")


@typed.nested
class DiagnosisSummary:
    """The record's summary: totals, windows, the slow steps and the warm-up."""

    steps: int = typed.doc("steps diagnosed")
    wall_ns: int = typed.doc("their wall time")
    explained_ns: int = typed.doc("the part the checks explain")
    unexplained_ns: int = typed.doc("the part no check explains")
    by_check: dict = typed.doc("check -> ns explained")
    windows: list = typed.doc("the windows the steps were read in")
    warm_up: WarmUp = typed.doc("the cold first steps (absent: none was cold, or an older record)", optional=True)
    slow_steps: list[SlowStep] = typed.doc("the slow steps (absent: a version-1 record)", optional=True)
    job: dict = typed.doc("the job across ranks", optional=True)


@typed.nested
class NextExperiment:
    """A candidate change ranked by what it could recover, bounded on the timeline."""

    rank: int = typed.doc("the rank it was found on")
    check: str = typed.doc("the check whose finding it addresses")
    candidate_change: str = typed.doc("the change to try")
    recoverable_upper_bound_ns: int = typed.doc("at most this much could be recovered")
    steps: int = typed.doc("steps the finding holds on")
    risk: str = typed.doc("low, medium or high")
    risk_note: str = typed.doc("why that risk")
    per_step_upper_bound_ns: int = typed.doc("the bound per step", optional=True)


# A finding's verdict (schemas/diagnosis.schema.json); compare/verdict.py's VERDICTS are the comparison's.
FINDING_VERDICTS = ("attributed", "unresolved", "not_applicable")

# Names a dataloader/queue wait tends to carry (torch DataLoader's record_function is
# "enumerate(DataLoader)#_...Iter.__next__"). Matched case-insensitively as whole name
# segments (bounded by the name's start/end or a non-alphanumeric character such as '.', '_',
# ' ', '#'), so "queue.wait" and "load_batch" match and "enqueue_work" does not.
DEFAULT_WAIT_PATTERNS = (
    r"queue", r"dataloader", r"data_wait", r"(next|get|load|fetch)[ _]?batch",
    r"wait_for_data", r"prefetch", r"_next_data",
    # The recorder's gap before a step's block (capture/recorder.py): in the README's
    # `for i, batch in enumerate(loader): with rec.step(i):` loop that is the loader's next().
    r"^between_steps$",
)


@functools.lru_cache(maxsize=64)
def segment_regex(patterns: tuple[str, ...]):
    """Patterns matched as whole name segments (see DEFAULT_WAIT_PATTERNS), on the linear-time
    engine (span names come from the trace; the patterns from the user). RE2 has no lookaround,
    so the segment edges are consumed: callers only ask whether a name matches (`search`)."""
    from ..core.patterns import compile_pattern

    body = "|".join(f"(?:{p})" for p in patterns)
    return compile_pattern(r"(?:^|[^A-Za-z0-9])(?:" + body + r")(?:$|[^A-Za-z0-9])", "--wait-span", ignorecase=True)


# The numeric keys of the workflow's `diagnose:` section besides warmup_steps (schemas/config.schema.json,
# core/config/numbers.py's CONFIG_NUMBERS checks each).
NUMERIC_KEYS = ("first_call_factor", "first_call_over_longest", "first_call_min_later", "first_call_min_ns")


@dataclass(frozen=True)
class DiagnoseOptions:
    """Knobs of the diagnosis; every default is justified beside it."""

    step_pattern: str | None = None
    """Regex over span names whose matches become steps (one group = step id) when the incident
    has no steps table or to override it; None uses the steps table."""
    wait_patterns: tuple[str, ...] = DEFAULT_WAIT_PATTERNS
    """Regexes (case-insensitive, matched as whole name segments) naming declared wait spans:
    host time in them is input wait."""
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
    """Fraction of kernels that must run shorter than the interval from their launch to the
    thread's next launch (the GPU idles before the next kernel arrives)."""
    launch_bound_min_host_launch_fraction: float = 0.5
    """Fraction of the step the submitting thread's launch loop must cover: its launch calls and
    the short pauses between two of them (the Python of each op; checks/launch_bound.py)."""
    throttle_clock_fraction: float = 0.95
    """SM clock below this fraction of its maximum while busy counts as throttled: boost
    clocks wander by a few percent without any clock-event reason set."""
    warmup_steps: int = 2
    """Steps at the start of each rank left out of the typical reference: the first steps pay
    for CUDA context, cuBLAS handles, allocator growth and autotuning, once."""
    min_comparable_steps: int = 3
    """Fewer comparable steps give no typical reference (excess is null): a median of one or
    two steps is that step itself."""
    slow_step_factor: float = 1.5
    """A step at least this many times its typical wall is a slow step (summary.slow_steps)."""
    first_call_factor: float = 10.0
    """A first call of a name is one-time when it took at least this many times the median of the
    name's later calls (checks/first_call.py). An op's calls vary 2-4x with its inputs and the
    caches (the H200 per-layer-sync trace's steady `aten::linear` first call 3.2x, `aten::mm`
    3.8x its later median); a lazy init is 100-1000x (that trace's first `linalg_vector_norm`,
    loading its reduce kernel: 1,120x)."""
    first_call_over_longest: float = 2.0
    """...and at least this many times the longest of them: a later call half as long as the first
    or longer means the first's length recurs (the same op on an input that size again: a sampled
    H200 trace's first `AccumulateGrad` 1.35 ms, a later one 1.24 ms), not a cost paid once."""
    first_call_min_later: int = 3
    """Fewer later calls of a name give no typical call: a median of one or two calls is that call."""
    first_call_min_ns: int = 1_000_000
    """A first call is one-time only when it ran at least this much longer than its typical call:
    a millisecond is a module load or a handle's creation, not the microseconds an op's first
    call spends in cold caches (a 10x of a 20 us op is jitter of a step's wall)."""
    max_gaps_listed: int = 5
    """Longest gaps listed per step (all gaps are counted and summed); the record is validated
    node by node, so each listed gap costs write time on runs of thousands of steps."""

    @classmethod
    def from_settings(cls, step_pattern: str | None = None, wait_patterns=None, warmup_steps: int | None = None,
                      where: str = "diagnose", **numbers) -> "DiagnoseOptions":
        """Options from the CLI flags or the workflow's `diagnose:` config key, regexes checked
        (one-line error naming the field); `numbers`: the other numeric keys of `diagnose:`
        (NUMERIC_KEYS), each checked as warmup_steps is."""
        from ..core.errors import InputError

        kw: dict = {"step_pattern": step_pattern}
        if step_pattern is not None:
            try:
                rx = re.compile(step_pattern)
            except re.error as exc:
                raise InputError(f"{where}.step_pattern", f"not a valid regex: {exc}") from None
            if rx.groups != 1:
                raise InputError(f"{where}.step_pattern", "the regex needs exactly one group capturing the step id")
        if wait_patterns:
            for p in wait_patterns:
                try:
                    re.compile(p)
                except re.error as exc:
                    raise InputError(f"{where}.wait_patterns", f"not a valid regex {p!r}: {exc}") from None
            kw["wait_patterns"] = tuple(wait_patterns)
        if warmup_steps is not None:  # the one check of numeric options (NaN, a float, 10**12 steps)
            from ..core.config.numbers import CONFIG_NUMBERS, number

            kw["warmup_steps"] = number(warmup_steps, f"{where}.warmup_steps", CONFIG_NUMBERS[("diagnose", "warmup_steps")])
        for key, v in numbers.items():
            if key not in NUMERIC_KEYS:
                raise TypeError(f"unknown diagnose option {key!r}")
            if v is not None:
                from ..core.config.numbers import CONFIG_NUMBERS, number

                kw[key] = number(v, f"{where}.{key}", CONFIG_NUMBERS[("diagnose", key)])
        return cls(**kw)

    @classmethod
    def from_config(cls, section: dict | None) -> "DiagnoseOptions":
        section = section or {}
        return cls.from_settings(section.get("step_pattern"), section.get("wait_patterns"), section.get("warmup_steps"),
                                 where="config diagnose", **{k: section.get(k) for k in NUMERIC_KEYS})

    def wait_regex(self) -> re.Pattern:
        return segment_regex(tuple(self.wait_patterns))

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
            "warmup_steps": self.warmup_steps,
            "min_comparable_steps": self.min_comparable_steps,
            "slow_step_factor": self.slow_step_factor,
            "first_call_factor": self.first_call_factor,
            "first_call_over_longest": self.first_call_over_longest,
            "first_call_min_later": self.first_call_min_later,
            "first_call_min_ns": self.first_call_min_ns,
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
    first: Intervals | None = None
    """The part of `claimed` credited ahead of the other checks, at checks.FIRST_AFTER
    (kernel_slowdown's held time: the GPU ran something else while the step's work waited)."""
