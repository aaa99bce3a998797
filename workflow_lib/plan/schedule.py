"""Trial schedule: a seeded, counterbalanced interleaving of arms within each block.

Why interleave: GPU timings drift with clocks, temperature and neighbours, so a block
of baseline runs followed by a block of candidate runs measures the drift (Mytkowicz
et al., ASPLOS 2009; Abedi & Brecht's randomized multiple interleaved trials, ICPE 2017).

Within a block the measured runs are laid out in *rounds*; a round holds one run of
each arm that still has runs left (A, B and, while control runs remain, A'). Rounds
come in mirrored pairs: the first round of a pair is a random permutation, the second
is its reverse (the ABBA counterbalancing of within-subject designs). Over a pair every
arm's mean position is the same, so a linear drift inside the block cancels from the
per-arm averages instead of only averaging out over many blocks; the random order per
pair keeps A and B exchangeable, which makes the signed-rank inference in compare.py
exact under no change. An unpaired last round (odd run counts) is a plain random
permutation. Warm-up runs come first and are never analysed; each arm gets `warmup_runs`
of them (A, B, A, B, ...; the entry's `warms` names the arm), because each arm runs from
its own work directory, whose files, caches and compiled kernels a baseline-only warm-up
would leave cold for the candidate.

Each block has its own generator, PCG64 seeded by (design.seed, block index), so one
block's schedule can be rebuilt without the others and adding blocks never reshuffles
the existing ones.
"""

from __future__ import annotations

import re

import numpy as np

from ..core.errors import RecordError
from ..core.config.numbers import check_design_size

ARMS_MEASURED = ("A", "B", "A'")


def block_id(index: int) -> str:
    """Block ids sort as strings: b000, b001, ..., b999, b1000. The one definition: the rules'
    block wildcards (rules/common.smk) and the report's per-block records read it here."""
    return f"b{index:03d}"


_BLOCK_ID = re.compile(r"b[0-9]{3,}")


def is_block_id(name: str) -> bool:
    """Whether `name` is an id block_id writes."""
    return _BLOCK_ID.fullmatch(name) is not None


def _rng(seed: int, block_index: int) -> np.random.Generator:
    # SeedSequence mixes the pair, so blocks (seed, 1) and (seed + 1, 0) are unrelated.
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed) & (2**63 - 1), block_index])))


def block_arms(runs_per_arm: int, control_runs: int, warmup_runs: int, rng: np.random.Generator) -> list[str]:
    """The arm of each run of one block, in execution order."""
    remaining = {"A": runs_per_arm, "B": runs_per_arm, "A'": control_runs}
    order: list[str] = ["warmup"] * warmup_runs
    previous: list[str] | None = None
    while any(remaining.values()):
        present = [arm for arm in ARMS_MEASURED if remaining[arm] > 0]
        if previous is not None and sorted(previous) == sorted(present):
            round_ = previous[::-1]  # second round of a mirrored pair
            previous = None
        else:
            round_ = [present[i] for i in rng.permutation(len(present))]
            previous = round_
        for arm in round_:
            remaining[arm] -= 1
        order.extend(round_)
    return order


def make_schedule(design: dict) -> dict[str, list[dict]]:
    """Per block id, the runs in execution order: [{"index": i, "arm": ...}, ...]."""
    try:
        blocks = int(design["blocks"])
        runs_per_arm = int(design["runs_per_arm"])
        control_runs = int(design["control_runs"])
        warmup_runs = int(design["warmup_runs"])
        seed = int(design["seed"])
    except KeyError as exc:
        raise RecordError("plan design", f"missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise RecordError("plan design", f"counts and seed must be integers ({exc})") from None
    if blocks < 1 or runs_per_arm < 1 or control_runs < 0 or warmup_runs < 0:
        raise RecordError(
            "plan design",
            f"need blocks >= 1, runs_per_arm >= 1, control_runs >= 0, warmup_runs >= 0; "
            f"got {blocks}, {runs_per_arm}, {control_runs}, {warmup_runs}",
        )
    check_design_size(blocks, runs_per_arm, control_runs, warmup_runs, "plan design")  # before any run is allocated
    schedule: dict[str, list[dict]] = {}
    warm = [{"arm": "warmup", "warms": arm} for _ in range(warmup_runs) for arm in ("A", "B")]
    for b in range(blocks):
        arms = block_arms(runs_per_arm, control_runs, 0, _rng(seed, b))
        runs = warm + [{"arm": arm} for arm in arms]
        schedule[block_id(b)] = [dict(r, index=i) for i, r in enumerate(runs)]
    return schedule
