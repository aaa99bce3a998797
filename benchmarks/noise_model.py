"""A GPU-timing noise model for validating the comparison, vectorized over experiments.

Each run's value is exp(log_base + terms) ns, the terms in natural-log units:
- run-to-run noise: Student t with 3 degrees of freedom, scaled to standard deviation
  `noise` (heavy tails: the t3 kurtosis is infinite);
- slow outliers: with probability `outlier_p` a run is slower by an exponential amount
  of mean `outlier_scale` (a preempted or throttled process only ever loses time);
- bimodal clock states: each block runs in the slow clock state with probability
  `slow_block_p`, and each run independently lands in the other state with
  probability `flip_p` (the state costs `clock_penalty`; cf. clock-event reasons in
  /work/shared/notes/gpu.md);
- drift: linear over the whole experiment, `drift` from the first to the last run
  (blocks run one after another on one GPU, each block in its scheduled order);
- effect: candidate (B) runs are multiplied by `1 + effect`.

`simulate(...)` returns per-block log ratios (d, c) exactly as compare.block_estimates
computes them from execution records, for either the stallcase interleaved schedule or
the same time slots filled "non-interleaved" (every baseline run first, then every
candidate run, the way sequential benchmark tools run two commands).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workflow_lib.plan.schedule import make_schedule

ARM_CODE = {"warmup": 0, "A": 1, "B": 2, "A'": 3}


@dataclass(frozen=True)
class NoiseModel:
    noise: float = 0.01  # run-to-run standard deviation (log units; 0.01 ~ 1%)
    outlier_p: float = 0.02
    outlier_scale: float = 0.20
    slow_block_p: float = 0.2
    flip_p: float = 0.1
    clock_penalty: float = 0.06
    drift: float = 0.0  # total linear drift across the experiment (log units)
    effect: float = 0.0  # true candidate/baseline - 1
    log_base: float = float(np.log(2.0e6))  # a 2 ms step


@dataclass(frozen=True)
class Design:
    blocks: int = 20
    runs_per_arm: int = 5
    control_runs: int = 5
    warmup_runs: int = 1
    confidence: float = 0.95

    def plan_design(self, seed: int) -> dict:
        """The plan record's `design` object for this design and seed."""
        return {
            "blocks": self.blocks, "runs_per_arm": self.runs_per_arm, "control_runs": self.control_runs,
            "warmup_runs": self.warmup_runs, "seed": seed, "max_retries": 2, "max_failed_fraction": 0.25,
            "confidence": self.confidence,
            "metric": {"name": "step_time", "source": "recorder_steps", "statistic": "median", "unit": "ns"},
        }


def schedules(design: Design, seeds: np.ndarray) -> np.ndarray:
    """Arm codes (experiments, blocks, runs per block) from the real make_schedule."""
    out = []
    for seed in seeds:
        sched = make_schedule(design.plan_design(int(seed)))
        out.append([[ARM_CODE[r["arm"]] for r in runs] for runs in sched.values()])
    return np.asarray(out, dtype=np.int8)


def noisy_slots(model: NoiseModel, shape: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """Log values for every time slot (experiments, blocks, runs per block), effect excluded."""
    e, b, r = shape
    heavy = rng.standard_t(3, size=shape) / np.sqrt(3.0)  # t3 has variance 3
    values = model.log_base + model.noise * heavy
    values += np.where(rng.random(shape) < model.outlier_p, rng.exponential(model.outlier_scale, size=shape), 0.0)
    slow_block = rng.random((e, b, 1)) < model.slow_block_p
    flipped = rng.random(shape) < model.flip_p
    values += np.where(slow_block ^ flipped, model.clock_penalty, 0.0)
    t = np.arange(b * r, dtype=float).reshape(1, b, r) / max(1, b * r - 1)
    return values + model.drift * t


def _split_arms(values: np.ndarray, arms: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-block A, B, A' values (..., blocks, runs) from slot values and arm codes."""
    order = np.argsort(arms, axis=-1, kind="stable")  # warmup, A..., B..., A'...
    v = np.take_along_axis(values, order, axis=-1)
    n, m = design.runs_per_arm, design.control_runs
    w = arms.shape[-1] - 2 * n - m  # warm-ups per block: one set for each arm (make_schedule)
    return v[..., w : w + n], v[..., w + n : w + 2 * n], v[..., w + 2 * n : w + 2 * n + m]


def _sequential_arms(design: Design) -> np.ndarray:
    """Arm of each slot (blocks, runs) when every baseline run (A, A') goes first and every B run last.

    Slots are numbered across the whole experiment, so the first part of the
    experiment holds only baseline runs and the last part only candidate runs; block k
    still gets its k-th share of each, as sequential tools would produce.
    """
    nb, w, n, m = design.blocks, design.warmup_runs, design.runs_per_arm, design.control_runs
    # Each arm's warm-ups (schedule.py gives A and B warmup_runs each), so the slot count matches.
    base = ["warmup"] * (2 * w) + [arm for pair in zip(["A"] * n, ["A'"] * m) for arm in pair]
    base += ["A"] * (n - min(n, m)) + ["A'"] * (m - min(n, m))
    return np.asarray([ARM_CODE[a] for _ in range(nb) for a in base] + [ARM_CODE["B"]] * (nb * n), dtype=np.int8)


@dataclass(frozen=True)
class Simulated:
    d: np.ndarray  # (experiments, blocks) log(median B / median A) per block
    c: np.ndarray  # (experiments, blocks) log(median A' / median A) per block
    a_ns: np.ndarray  # (experiments, blocks * runs_per_arm) every A run's value, ns
    b_ns: np.ndarray  # (experiments, blocks * runs_per_arm) every B run's value, ns
    a_block_ns: np.ndarray  # (experiments, blocks, runs_per_arm)
    b_block_ns: np.ndarray
    c_block_ns: np.ndarray  # (experiments, blocks, control_runs)


def simulate(model: NoiseModel, design: Design, experiments: int, seed: int, *, interleaved: bool = True) -> Simulated:
    """Simulate `experiments` independent experiments of `design` under `model`."""
    rng = np.random.Generator(np.random.PCG64(seed))
    seeds = rng.integers(0, 2**31, size=experiments)
    arms = schedules(design, seeds)
    e, nb, r = arms.shape
    values = noisy_slots(model, arms.shape, rng)
    if interleaved:
        split = _split_arms(values, arms, design)
    else:
        flat_arms = _sequential_arms(design)
        flat_vals = values.reshape(e, nb * r)
        base_len = flat_arms.size - nb * design.runs_per_arm
        base_vals = flat_vals[:, :base_len].reshape(e, nb, -1)
        base_arms = np.broadcast_to(flat_arms[:base_len].reshape(nb, -1), base_vals.shape)
        a_only, c_only = _split_baseline(base_vals, base_arms, design)
        b = flat_vals[:, base_len:].reshape(e, nb, design.runs_per_arm)
        split = (a_only, b, c_only)
    a, b, c = split
    b = b + np.log1p(model.effect)
    ma, mb = np.median(a, axis=-1), np.median(b, axis=-1)
    mc = np.median(c, axis=-1) if c.shape[-1] else np.full(ma.shape, np.nan)
    return Simulated(mb - ma, mc - ma, np.exp(a).reshape(e, -1), np.exp(b).reshape(e, -1), np.exp(a), np.exp(b), np.exp(c))


def _split_baseline(values: np.ndarray, arms: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(arms, axis=-1, kind="stable")  # warmup, A..., A'...
    v = np.take_along_axis(values, order, axis=-1)
    w, n = design.warmup_runs, design.runs_per_arm
    return v[..., w : w + n], v[..., w + n :]
