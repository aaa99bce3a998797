"""The workflow side of `trials: {stop: early}`: which blocks run, and one look per wave.

Blocks stay Snakemake jobs (one per block, each after its preflight). The plan fixes the looks
(sequential.design: after how many blocks, at which level). The `look` checkpoint
(rules/compare.smk) runs after the blocks of one wave, judges them (sequential.judge) and
writes looks/<wave>.json; the compare rule's input asks for look 0, and, while a look says
`continue`, for the next, whose input is the next wave's blocks. So a wave is only started
when the look before it said so, and compare reads exactly the blocks of the stopping look.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..core import typed
from ..plan.schedule import block_id
from ..plan.types import Plan, Stop
from ..trials.types import Execution
from . import sequential
from .types import LookRecord


def wave_id(look: int) -> str:
    return f"w{look:02d}"


def look_index(wave: str) -> int:
    return int(wave.removeprefix("w"))


def blocks_of_look(stop: Stop, look: int) -> list[str]:
    """The block ids look `look` reads: the schedule's first `blocks`."""
    return [block_id(i) for i in range(int(stop.looks[look].blocks))]


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def judge_executions(plan: Plan, executions: dict[str, Execution], look: int) -> sequential.Look:
    """The look on the used blocks among the look's own (compare.block_estimate's exclusions apply)."""
    from .build import block_estimate

    stop = plan.design.stop
    digest = plan.digest()
    ids = blocks_of_look(stop, look)
    ests = [block_estimate(b, plan.schedule[b], executions.get(b), plan.design, digest) for b in ids]
    used = [e for e in ests if e.used]
    d = np.asarray([e.log_ratio for e in used], float)
    c = np.asarray([e.control_log_ratio for e in used if e.control_log_ratio is not None], float)
    try:
        return sequential.judge(d, c, stop, look)
    except (FloatingPointError, ArithmeticError, ValueError):
        last = look == len(stop.looks) - 1  # a failed computation proves nothing: go on, or stop inconclusive
        return sequential.Look(look, int(stop.looks[look].blocks), 1.0 - float(stop.looks[look].alpha),
                               last, "block_limit" if last else "continue", None)


def look_record(plan: Plan, executions: dict[str, Execution], wave: str) -> LookRecord:
    """One look (checkpoint `look`, through compare/rule.py run_look): judge the blocks so far."""
    k = look_index(wave)
    got = judge_executions(plan, executions, k)
    dec = got.decision
    pick = (lambda name: _num(float(getattr(dec, name)[0]))) if dec is not None else (lambda name: None)
    from . import verdict as V

    return LookRecord(incident_id=plan.incident_id, plan_digest=plan.digest(), look=k,
                      looks_planned=len(plan.design.stop.looks), blocks=got.blocks, level=got.level, stop=got.stop,
                      why=got.why, verdict=V.VERDICTS[sequential.verdict_code(got)] if got.stop else None,
                      estimate_log=pick("estimate_log"), low_log=pick("low_log"), high_log=pick("high_log"),
                      floor_log=pick("floor_log"))


def stopped(look_path: str | os.PathLike) -> bool:
    """Whether the look written at `look_path` ended the design (the compare rule's input asks)."""
    return bool(typed.read(look_path, LookRecord).stop)


def execution_targets(config_trials: dict, look_path, execution_path) -> list[str]:
    """The compare rule's executions for a `stop: early` design: wave by wave until a look stops.

    `look_path(wave)` returns the checkpoint's output (raising Snakemake's incomplete-checkpoint
    exception until that look has run); `execution_path(block)` the block's execution record."""
    stop = sequential.design(config_trials)
    for k in range(len(stop.looks)):
        if stopped(look_path(wave_id(k))):
            return [execution_path(b) for b in blocks_of_look(stop, k)]
    return [execution_path(b) for b in blocks_of_look(stop, len(stop.looks) - 1)]


def look_inputs(config_trials: dict, wave: str, execution_path) -> list[str]:
    """The look checkpoint's input: the blocks through its wave."""
    stop = sequential.design(config_trials)
    return [execution_path(b) for b in blocks_of_look(stop, look_index(wave))]
