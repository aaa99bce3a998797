"""Numbers a user sets: one check for config keys, CLI flags and recorder options, and the caps.

A number a person types (`--min-wait-ms nan`, `latency:k=inf`, `trials.blocks: 1e9`) must be
finite, of the right kind (an integer where a count is meant), inside its range and read in a
stated unit; otherwise one line names the option, the value and the range it accepts. JSON
Schema cannot say "finite" (NaN compares false against `minimum`, so `.nan` passes it) and
cannot see a memory budget, so the config is checked here as well as against the schema.

Sizes are capped from the memory budget before anything is allocated (docs/security.md,
"Bounded resources"): a plan holds one entry per run and every later stage keeps a few
records per run, so blocks x runs is bounded by what fits in MEMORY_BUDGET_BYTES.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..bounds import INT64_MAX, show
from ..errors import StallcaseError

# Peak RSS any one stallcase process may reach whatever its input (docs/security.md; the
# corpus runner fails an entry over it).
MEMORY_BUDGET_BYTES = 2 << 30
# What one run costs across the pipeline: its plan entry (~0.3 KiB as a dict), its execution
# record (metric values, steps, status: ~2 KiB for a few hundred steps) and the comparison's
# arrays, rounded up. Half the budget goes to runs, so blocks x runs <= 2^18 (262,144).
BYTES_PER_RUN = 4 << 10
MAX_RUNS = (MEMORY_BUDGET_BYTES // 2) // BYTES_PER_RUN
# Each block is one Snakemake job (a job object, its wildcards, inputs and outputs in the DAG:
# tens of KiB); a quarter of the budget goes to the DAG.
BYTES_PER_BLOCK = 64 << 10
MAX_BLOCKS = (MEMORY_BUDGET_BYTES // 4) // BYTES_PER_BLOCK
# The collectives analysis holds a dozen [op, member rank] matrices per communicator (states,
# counters, windows, pivots): measured 555 B per cell (9,000 ops x 2,300 ranks peaked at 11.5 GB,
# 2026-12-01), so ops x member ranks is capped at three quarters of the budget at 600 B a cell.
BYTES_PER_MATCH_CELL = 600
MAX_MATCH_CELLS = (MEMORY_BUDGET_BYTES * 3 // 4) // BYTES_PER_MATCH_CELL
# Above 2,000 steps the diagnosis runs over all steps of a rank at once as columns and writes
# them to its tables rank by rank (diagnose/columns.py): measured 0.96 KiB a step with its
# evidence (host-only synthetic steps, 1M steps peaked at 1,119 MiB and 2M at 2,106 MiB; with
# kernels 1M steps 1,686 MiB; 2026-12-02), so the steps one diagnosis takes are capped at seven
# eighths of the budget at 1 KiB a step. (Step by step, up to 2,000, a step held 44.5 KiB.)
BYTES_PER_DIAGNOSED_STEP = 1 << 10
MAX_DIAGNOSED_STEPS = (MEMORY_BUDGET_BYTES * 7 // 8) // BYTES_PER_DIAGNOSED_STEP
# The latency trigger preallocates its window (int64 per step plus a sorted list: ~40 B).
MAX_TRIGGER_WINDOW_STEPS = 1 << 20
# Counts of steps with no allocation behind them (warm-up, cooldown): any int64 is safe,
# but a value past a billion steps is a typo, not a design.
MAX_STEP_COUNT = 10**9

_ASCII_NUMBER = re.compile(r"\A[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_ASCII_INT = re.compile(r"\A[+-]?[0-9]+\Z")


@dataclass(frozen=True)
class Spec:
    """What one numeric option accepts: a range, its unit, integer or real."""

    lo: float
    hi: float
    unit: str
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        left = "(" if self.lo_open else "["
        right = ")" if self.hi_open else "]"
        hi = "inf" if self.hi == math.inf else _fmt(self.hi)
        return f"{kind} in {left}{_fmt(self.lo)}, {hi}{right} {self.unit}".rstrip()

    def contains(self, v: float) -> bool:
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below


def _fmt(x: float) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        x = int(x)
    return str(x)


def number(v: Any, option: str, spec: Spec) -> int | float:
    """The checked value of `option` (a number, or text from a command line in ASCII digits)."""
    if isinstance(v, str):
        t = v.strip()
        if spec.integer and _ASCII_INT.match(t):
            v = int(t)
        elif _ASCII_NUMBER.match(t):
            v = float(t)
        else:  # 'nan', 'inf', '²', '1,5' and the empty string
            raise StallcaseError(option, f"is {show(v)}, not a number: accepts {spec.describe()} (ASCII digits)")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise StallcaseError(option, f"is {show(v)}: accepts {spec.describe()}")
    if isinstance(v, float):
        if not math.isfinite(v):
            raise StallcaseError(option, f"is {v}: accepts {spec.describe()}")
        if spec.integer:
            if not v.is_integer():
                raise StallcaseError(option, f"is {show(v)}, not a whole number: accepts {spec.describe()}")
            v = int(v)
    if not spec.contains(v):
        raise StallcaseError(option, f"is {show(v)}: accepts {spec.describe()}")
    return v


# ---- command-line and recorder options
# `stallcase collectives --min-wait-ms`: up to an hour (a wait longer than that is a hang, which
# the analysis reports as pending, not as a wait to attribute).
MIN_WAIT_MS = Spec(0, 3_600_000, "ms")
# `stallcase record --trigger latency:k=..,warmup=..,window=..,cooldown=..` (capture/trigger.py):
# k is a ratio to the rolling median (> 1: a step slower than the median; 1000 is already a hang).
TRIGGER_OPTIONS: dict[str, tuple[str, Spec]] = {
    "k": ("k", Spec(1, 1000, "x the rolling median", lo_open=True)),
    "warmup": ("warmup_steps", Spec(0, MAX_STEP_COUNT, "steps", integer=True)),
    "window": ("window_steps", Spec(3, MAX_TRIGGER_WINDOW_STEPS, "steps", integer=True)),
    "cooldown": ("cooldown_steps", Spec(0, MAX_STEP_COUNT, "steps", integer=True)),
}

# ---- the workflow configuration's numeric keys (types are the schema's; this adds finite,
# range and unit; `check_numbers` below adds the caps that depend on several keys)
CONFIG_NUMBERS: dict[tuple[str, ...], Spec] = {
    ("trials", "blocks"): Spec(1, MAX_BLOCKS, "blocks", integer=True),
    ("trials", "runs_per_arm"): Spec(1, MAX_RUNS, "runs", integer=True),
    ("trials", "control_runs"): Spec(0, MAX_RUNS, "runs", integer=True),
    ("trials", "warmup_runs"): Spec(0, MAX_RUNS, "runs per arm", integer=True),
    ("trials", "seed"): Spec(0, INT64_MAX, "", integer=True),
    ("trials", "max_retries"): Spec(0, 100, "retries", integer=True),
    ("trials", "max_failed_fraction"): Spec(0, 1, "(a fraction)"),
    ("trials", "confidence"): Spec(0, 1, "(a probability)", lo_open=True, hi_open=True),
    ("trials", "run_timeout_s"): Spec(0, 7 * 24 * 3600, "seconds", lo_open=True),
    ("trials", "metric", "skip_steps"): Spec(0, MAX_STEP_COUNT, "steps", integer=True),
    ("diagnose", "warmup_steps"): Spec(0, MAX_STEP_COUNT, "steps", integer=True),
    # checks/first_call.py: a factor of 1 or less would call any first call one-time.
    ("diagnose", "first_call_factor"): Spec(1, 1e9, "x the median of the later calls", lo_open=True),
    ("diagnose", "first_call_over_longest"): Spec(1, 1e9, "x the longest later call"),
    ("diagnose", "first_call_min_later"): Spec(1, MAX_STEP_COUNT, "calls", integer=True),
    ("diagnose", "first_call_min_ns"): Spec(0, 3_600_000_000_000, "ns", integer=True),
}


def runs_per_block(runs_per_arm: int, control_runs: int, warmup_runs: int) -> int:
    """Runs one block executes: A and B `runs_per_arm` times, A' `control_runs`, and a warm-up
    of `warmup_runs` for each of A and B (schedule.build_schedule)."""
    return 2 * runs_per_arm + control_runs + 2 * warmup_runs


def check_design_size(blocks: int, runs_per_arm: int, control_runs: int, warmup_runs: int, where: str) -> None:
    """Refuse a design whose runs would not fit the memory budget, before any is allocated."""
    per = runs_per_block(runs_per_arm, control_runs, warmup_runs)
    total = blocks * per
    if blocks > MAX_BLOCKS or total > MAX_RUNS:
        raise StallcaseError(where, f"blocks x runs per block is {blocks} x {per} = {total} runs, over the cap of {MAX_RUNS} runs "
                                    f"in {MAX_BLOCKS} blocks at most ({BYTES_PER_RUN >> 10} KiB per run, half of the "
                                    f"{MEMORY_BUDGET_BYTES >> 30} GiB memory budget)")


def min_blocks(confidence: float) -> int:
    """Fewest blocks for which a signed-rank interval at `confidence` exists at all:
    the smallest n with 2 * 2**-n <= 1 - confidence (6 at 0.95, 8 at 0.99). Defined here, where
    a design below it is refused; the comparison (compare/stats.py) reads the same function."""
    alpha = 1.0 - confidence
    return max(1, math.ceil(math.log2(2.0 / alpha) - 1e-12))


def check_numbers(config: dict, where: str = "config") -> None:
    """Refuse a numeric key that is not finite or out of range, a design over the run cap, and a
    design that can never conclude (fewer blocks than an interval needs at its confidence)."""
    got: dict[tuple[str, ...], int | float] = {}
    for path, spec in CONFIG_NUMBERS.items():
        node: Any = config
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, (int, float)) and not isinstance(node, bool):  # other types: the schema's line
            got[path] = number(node, f"{where} {'.'.join(path)}", spec)
    trials = {p[1]: v for p, v in got.items() if p[0] == "trials" and len(p) == 2}
    if {"blocks", "runs_per_arm", "control_runs", "warmup_runs"} <= trials.keys():
        check_design_size(trials["blocks"], trials["runs_per_arm"], trials["control_runs"], trials["warmup_runs"], f"{where} trials")
    if "blocks" in trials and "confidence" in trials:
        need = min_blocks(trials["confidence"])
        if trials["blocks"] < need:
            raise StallcaseError(f"{where} trials.blocks", f"is {trials['blocks']}: at confidence {trials['confidence']} no interval exists "
                                                           f"below {need} blocks, so the comparison could never conclude; use blocks >= {need}")
