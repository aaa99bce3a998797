"""Per-run components: one trial run's diagnosis reduced to per-step means of where the time went.

With `trials.record_runs` every run gets its own incident and diagnosis; the runner keeps
this summary in the execution record (`runs[i].capture.components`) so the comparison can
estimate, per component, candidate - baseline with its own A/A floor (compare_components.py).

Components (ns per step, mean over the run's measured steps, i.e. after the metric's
`skip_steps` per rank):
- `wall`: the step's wall time (the diagnosis's step windows).
- `gpu_busy`, `host_api`: union of GPU activity / of host CUDA API calls inside the step.
  Both overlap other components; they are measures, not a partition.
- `check:<name>`: time the check's finding explains (`explains_ns`; overlaps with earlier
  findings already removed on the timeline), 0 where the check does not apply.
- `unexplained`: the step time no finding explains. The `check:*` components and
  `unexplained` partition the wall time: they add up to `wall` exactly.
- `span:<name>`: time of the step's thread inside its top-level (depth 0) recorder spans of
  that name, clipped to the step. Top-level spans of one thread never overlap, so these are
  a partition of the host thread's step time (with `span:(none)`, the rest); observed
  without any GPU source, which is what explains a CPU run. The `MAX_SPAN_NAMES` names with
  the most time are kept.
- `excess:<cause>` and `excess:unexplained`: the step's excess over its rank's typical step,
  credited to causes (`steps[i].excess` from the diagnosis, when it has one).

Means, not medians: the partition must add up, so that each component's share of the
wall-time change is meaningful; medians of parts do not add to the median of the whole.
A component whose evidence the run did not observe (a null measure, a check that came out
`unresolved` in a measured step, no excess reference) is null with the reason, never 0.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow.compute as pc

MEASURES = {"wall": "wall_ns", "gpu_busy": "busy_ns", "host_api": "host_api_ns"}
UNEXPLAINED = "unexplained"
CHECK_PREFIX = "check:"
EXCESS_PREFIX = "excess:"
SPAN_PREFIX = "span:"
NO_SPAN = SPAN_PREFIX + "(none)"
# A run's record stays small whatever the workload names its spans.
MAX_SPAN_NAMES = 12

# How a component reads in a sentence ("input wait -12.3 ms/step").
LABELS = {
    "wall": "wall time", "gpu_busy": "GPU busy", "host_api": "host API time", UNEXPLAINED: "unexplained",
    "input_starvation": "input wait", "sync_stall": "sync", "host_submission": "host submission",
    "launch_bound": "launch overhead", "clock_throttle": "clock throttle", "gpu_bound": "GPU work",
    "collective_wait": "collective wait", "gpu_work_growth": "GPU work growth", "host_work": "host work",
}


def label(name: str) -> str:
    """Words for a component name: 'check:sync_stall' -> 'sync', 'excess:host_work' -> 'excess host work'."""
    if name.startswith(CHECK_PREFIX):
        key = name[len(CHECK_PREFIX):]
        return LABELS.get(key, key.replace("_", " "))
    if name.startswith(EXCESS_PREFIX):
        key = name[len(EXCESS_PREFIX):]
        return "excess " + LABELS.get(key, key.replace("_", " "))
    if name.startswith(SPAN_PREFIX):
        return "span " + name[len(SPAN_PREFIX):]
    return LABELS.get(name, name.replace("_", " "))


def _rank_key(st: dict) -> tuple:
    # rank is null in a single-process capture; the step's thread then tells the loops apart.
    return (st.get("rank") is None, st.get("rank") or 0, st.get("thread_id") or 0)


def measured_steps(steps: list[dict], skip_steps: int) -> list[dict]:
    """The steps the trial metric counts: per rank in time order, the first `skip_steps` left out."""
    by_rank: dict[tuple, list[dict]] = defaultdict(list)
    for st in steps:
        by_rank[_rank_key(st)].append(st)
    out: list[dict] = []
    for key in sorted(by_rank):
        out += sorted(by_rank[key], key=lambda s: (s["start_ns"], s["step_id"]))[skip_steps:]
    return out


def _measure(steps: list[dict], field: str) -> tuple[float | None, str | None]:
    values = [st.get(field) for st in steps]
    if any(v is None for v in values):
        return None, f"{field} not observed in {sum(v is None for v in values)} of {len(values)} measured steps"
    return sum(values) / len(values), None


def _check(steps: list[dict], check: str) -> tuple[float | None, str | None]:
    total = 0
    for st in steps:
        for f in st.get("findings", []):
            if f["check"] != check:
                continue
            if f["verdict"] == "unresolved":
                missing = ", ".join(f.get("missing") or []) or "evidence missing"
                return None, f"{check} unresolved in step {st['step_id']} (missing: {missing})"
            total += int(f["explains_ns"])
    return total / len(steps), None


def _excess(steps: list[dict]) -> tuple[dict[str, float], str | None]:
    """Mean excess per cause over the measured steps that have a typical reference."""
    if not any("excess" in st for st in steps):
        return {}, "the diagnosis has no per-step excess (steps[].excess)"
    ref = [st["excess"] for st in steps if st.get("excess") is not None]
    if not ref:
        return {}, "no measured step has a typical reference (steps[].excess is null)"
    sums: dict[str, float] = defaultdict(float)
    for ex in ref:
        for cause, ns in (ex.get("by_cause") or {}).items():
            sums[EXCESS_PREFIX + cause] += ns
        sums[EXCESS_PREFIX + UNEXPLAINED] += ex.get("unexplained_ns", 0)
    return {name: total / len(ref) for name, total in sums.items()}, None


def _spans(steps: list[dict], spans) -> tuple[dict[str, float], str | None]:
    """Mean time per step in top-level spans, by name (see the module docstring)."""
    if spans is None or spans.num_rows == 0:
        return {}, "the run recorded no spans"
    top = spans.filter(pc.equal(spans["depth"], 0))
    thread = top["thread_id"].to_numpy(zero_copy_only=False)
    names = np.asarray(top["name"].to_pylist(), dtype=object)
    start = top["start_ns"].to_numpy(zero_copy_only=False).astype(np.int64)
    end = top["end_ns"].to_numpy(zero_copy_only=False).astype(np.int64)
    totals: dict[str, float] = defaultdict(float)
    covered_all = 0.0
    for st in steps:
        # Spans carry the recorder's clock, as the steps table does; the step's own thread only.
        lo, hi = int(st["start_ns"]), int(st["end_ns"])
        on = (thread == st.get("thread_id")) & (start < hi) & (end > lo)
        part = np.minimum(end[on], hi) - np.maximum(start[on], lo)
        for name, ns in zip(names[on], part):
            totals[SPAN_PREFIX + str(name)] += float(ns)
        covered_all += float(part.sum())
    if not totals:
        return {}, "no top-level span on the steps' threads"
    kept = sorted(totals, key=lambda k: (-totals[k], k))[:MAX_SPAN_NAMES]
    n = len(steps)
    out = {k: totals[k] / n for k in kept}
    if len(kept) < len(totals):  # a dropped name is unknown in this run, not 0
        out.update({k: None for k in totals if k not in out})
    out[NO_SPAN] = (sum(int(st["wall_ns"]) for st in steps) - covered_all) / n
    return out, None


def run_components(diagnosis: dict, skip_steps: int, spans=None) -> dict:
    """The execution record's `capture.components` for one run's diagnosis (and, when given,
    the run's spans table, to split the host thread's step time by span)."""
    steps = measured_steps(diagnosis["steps"], skip_steps)
    values: dict[str, float | None] = {}
    unobserved: dict[str, str] = {}
    if not steps:
        return {"statistic": "mean", "steps": 0, "values_ns": {}, "unobserved": {"wall": "no measured step in the run's diagnosis"},
                "excess_available": False, "spans_available": False, "next_experiments": []}

    def put(name: str, got: tuple[float | None, str | None]) -> None:
        values[name] = got[0]
        if got[1]:
            unobserved[name] = got[1]

    for name, field in MEASURES.items():
        put(name, _measure(steps, field))
    for check in diagnosis.get("checks", []):
        put(CHECK_PREFIX + check, _check(steps, check))
    put(UNEXPLAINED, _measure(steps, "unexplained_ns"))
    by_span, span_why = _spans(steps, spans)
    values.update(by_span)
    if span_why:
        unobserved[SPAN_PREFIX + "*"] = span_why
    excess, why = _excess(steps)
    values.update(excess)
    if why:
        unobserved[EXCESS_PREFIX + "*"] = why
    total_steps = max(1, int(diagnosis["summary"]["steps"]))
    # The diagnosis's own bound, per step of the whole diagnosed run.
    bounds = [{"check": e["check"], "bound_ns_per_step": e["recoverable_upper_bound_ns"] / total_steps}
              for e in diagnosis.get("next_experiments", [])]
    return {"statistic": "mean", "steps": len(steps), "values_ns": values, "unobserved": unobserved,
            "excess_available": why is None, "spans_available": span_why is None, "next_experiments": bounds}


def value_of(components: dict | None, name: str) -> tuple[float | None, str | None]:
    """A run's value of one component, or (None, why). A cause absent from a run whose
    diagnosis has excess by cause had no excess: 0 (only causes with > 0 are listed)."""
    if components is None:
        return None, "the run has no diagnosis"
    vals = components.get("values_ns", {})
    if name in vals:
        v = vals[name]
        return (v, None) if v is not None else (None, components.get("unobserved", {}).get(name, "not observed"))
    for prefix, flag in ((EXCESS_PREFIX, "excess_available"), (SPAN_PREFIX, "spans_available")):
        if name.startswith(prefix):
            if components.get(flag):
                return 0.0, None
            return None, components.get("unobserved", {}).get(prefix + "*", f"{prefix[:-1]} components not available")
    return None, f"{name} not in the run's diagnosis"
