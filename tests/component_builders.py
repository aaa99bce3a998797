"""Execution records whose runs carry per-step components, built to the contract
(components.py: `capture.components`; diagnosis steps[].excess), and a vectorized
simulator of realistic per-component noise for the A/A validation."""

from __future__ import annotations

import numpy as np

from benchmarks.noise_model import Design, _split_arms, schedules
from benchmarks import compare_builders as cb
from workflow_lib.core import records

# The parts that partition a step (check:* and unexplained), in ns per step; the wall is their sum.
PARTS = ("check:input_starvation", "check:sync_stall", "check:gpu_bound", "check:host_submission",
         "check:clock_throttle", "unexplained")


def components(parts: dict[str, float], *, excess: dict[str, float] | None = None,
               bounds: dict[str, float] | None = None, extra: dict[str, float | None] | None = None) -> dict:
    """One run's `capture.components` from its parts; gpu_busy/host_api derived from them."""
    values = dict(parts)
    values["wall"] = float(sum(parts.values()))
    values["gpu_busy"] = parts.get("check:gpu_bound", 0.0) * 1.02
    values["host_api"] = parts.get("check:sync_stall", 0.0) + 0.05e6
    values.update({f"excess:{k}": v for k, v in (excess or {}).items()})
    values.update(extra or {})
    return {"statistic": "mean", "steps": 20, "values_ns": values, "unobserved": {}, "excess_available": excess is not None,
            "spans_available": False,
            "next_experiments": [{"check": c, "bound_ns_per_step": b} for c, b in (bounds or {}).items()]}


def experiment(des: dict, comp_of, *, same_as_baseline: bool = False, no_capture=frozenset()):
    """Plan, executions and digests; `comp_of(k, arm, index)` gives a run's components (or None),
    and the run's metric is its wall time. Runs in `no_capture` ((block, index)) have no diagnosis."""
    pl = cb.plan(des, same_as_baseline=same_as_baseline)
    pd = records.digest_of(pl)
    executions, digests = {}, {}
    for k, block in enumerate(sorted(pl["schedule"])):
        runs = []
        for entry in pl["schedule"][block]:
            comp = comp_of(k, entry["arm"], entry["index"])
            run = cb.run(entry["index"], entry["arm"], comp["values_ns"]["wall"] if comp else 1e6)
            run["capture"] = None if (k, entry["index"]) in no_capture else {
                "incident": f"/w/captures/{entry['index']:03d}-0", "diagnosis": "/w/diagnosis.json", "error": None,
                "components": comp}
            runs.append(run)
        rec = {"schema_version": 2, "kind": "execution", "block": block, "plan_digest": pd,
               "preflight_digest": cb.DIGEST0, "node": "node-0", "status": "complete", "runs": runs}
        records.validate(rec, "execution")
        executions[block], digests[block] = rec, records.digest_of(rec)
    return pl, executions, digests, pd


# --- realistic per-component noise, vectorized over experiments -------------------------

# name -> (typical ns per step, run-to-run log sd, probability a run has none of it)
NOISE = {
    "check:input_starvation": (5.0e6, 0.15, 0.0),  # queue wait: wide run-to-run spread
    "check:sync_stall": (0.3e6, 0.30, 0.0),
    "check:gpu_bound": (8.0e6, 0.01, 0.0),  # GPU work: tight, but moves with the clock state
    "check:host_submission": (0.2e6, 0.50, 0.6),  # sparse: absent from most runs
    "check:clock_throttle": (0.0, 0.0, 1.0),  # never present: every value is exactly 0
    "unexplained": (0.1e6, 0.50, 0.0),
    "excess:input_starvation": (1.0e6, 0.80, 0.7),  # a few slow steps in some runs only
}


def simulate_components(design: Design, experiments: int, seed: int, *, drift: float = 0.05, plan_seeds=None):
    """Per-block d and c, (experiments, components, blocks), of every component in NOISE plus the
    wall (their partition's sum), for an A/A experiment: t3 heavy-tailed run-to-run noise, slow
    outlier runs, per-block clock states that stretch GPU work, linear drift, exact zeros."""
    rng = np.random.Generator(np.random.PCG64(seed))
    seeds = rng.integers(0, 2**31, size=experiments) if plan_seeds is None else np.asarray(plan_seeds)
    arms = schedules(design, seeds)
    e, nb, r = arms.shape
    t = np.arange(nb * r, dtype=float).reshape(1, nb, r) / max(1, nb * r - 1)
    slow = (rng.random((e, nb, 1)) < 0.2) ^ (rng.random((e, nb, r)) < 0.1)
    values = {}
    for name, (typical, sd, none_p) in NOISE.items():
        heavy = rng.standard_t(3, size=(e, nb, r)) / np.sqrt(3.0)
        v = typical * np.exp(sd * heavy + drift * t)
        if name == "check:gpu_bound":
            v = v * np.where(slow, 1.06, 1.0)
        if name == "unexplained":  # a preempted run loses time no check explains
            v = v + np.where(rng.random((e, nb, r)) < 0.02, rng.exponential(0.2 * 14e6, size=(e, nb, r)), 0.0)
        values[name] = np.where(rng.random((e, nb, r)) < none_p, 0.0, v)
    values["wall"] = sum(values[n] for n in PARTS if n in values)
    names = list(values)
    d, c = [], []
    for name in names:
        a, b, ctl = _split_arms(values[name], arms, design)
        ma = np.median(a, axis=-1)
        d.append(np.median(b, axis=-1) - ma)
        c.append(np.median(ctl, axis=-1) - ma)
    return names, np.stack(d, axis=1), np.stack(c, axis=1), values, arms
