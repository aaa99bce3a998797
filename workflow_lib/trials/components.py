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
- `role:<role>:...` / `rank:<r>:...`: the same per role (or per rank) of a multi-process
  run (job_components.py).

Means, not medians: the partition must add up, so that each component's share of the
wall-time change is meaningful; medians of parts do not add to the median of the whole.
A component whose evidence the run did not observe (a null measure, a check that came out
`unresolved` in a measured step, no excess reference) is null with the reason, never 0.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..diagnose import step_tables
from ..diagnose.stored import Diagnosis, as_diagnosis
from . import job_components
from .types import RunComponents, StepBound

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
    """Words for a component name: 'check:sync_stall' -> 'sync', 'excess:host_work' -> 'excess host work',
    'role:consumer:check:input_starvation' -> 'consumer input wait', 'rank:2:wall' -> 'rank 2 wall time'."""
    if job_components.is_job(name):
        kind, who, rest = job_components.split(name)
        return (f"{who} " if kind == "role" else f"rank {who} ") + label(rest)
    if name.startswith(CHECK_PREFIX):
        key = name[len(CHECK_PREFIX):]
        return LABELS.get(key, key.replace("_", " "))
    if name.startswith(EXCESS_PREFIX):
        key = name[len(EXCESS_PREFIX):]
        return "excess " + LABELS.get(key, key.replace("_", " "))
    if name.startswith(SPAN_PREFIX):
        return "span " + name[len(SPAN_PREFIX):]
    return LABELS.get(name, name.replace("_", " "))


class Measured:
    """The measured steps of a run's diagnosis: rows of its steps table, in the metric's order
    (per rank and thread in time order, each one's first `skip_steps` left out)."""

    def __init__(self, d: Diagnosis, rows: np.ndarray):
        self.d, self.rows = d, np.asarray(rows, np.int64)

    def __len__(self) -> int:
        return int(self.rows.size)

    def col(self, name: str) -> pa.ChunkedArray:
        return self.d.steps_table[name].take(pa.array(self.rows, pa.int64()))

    def subset(self, mask: np.ndarray) -> "Measured":
        return Measured(self.d, self.rows[mask])

    def findings_of(self, check: str) -> np.ndarray:
        """Findings-table rows of `check` on the measured steps, in measured order (a step's
        findings in record order)."""
        f = self.d.findings_table
        at = np.full(self.d.n_steps, -1, np.int64)
        at[self.rows] = np.arange(self.rows.size)
        pos = at[f["step_row"].to_numpy()]
        sel = np.flatnonzero((pos >= 0) & step_tables.is_value(step_tables.dict_codes(f["check"]), check))
        return sel[np.lexsort((sel, pos[sel]))]


def measured_rows(d: Diagnosis, skip_steps: int) -> np.ndarray:
    """The steps the trial metric counts (rows of the steps table): per rank in time order, the
    first `skip_steps` left out. A null rank (a single-process capture) sorts after the ranks,
    and the step's thread then tells the loops apart."""
    t = d.steps_table
    if t.num_rows == 0:
        return np.zeros(0, np.int64)
    null = t["rank"].is_null().to_numpy(zero_copy_only=False)
    rank, tid = t["rank"].fill_null(0).to_numpy(), t["thread_id"].to_numpy()
    order = np.lexsort((t["step_id"].to_numpy(), t["start_ns"].to_numpy(), tid, rank, null))
    key = np.stack([null[order], rank[order], tid[order]], axis=1)
    new = np.r_[True, np.any(key[1:] != key[:-1], axis=1)]
    first = np.maximum.accumulate(np.where(new, np.arange(order.size), 0))
    return order[np.arange(order.size) - first >= skip_steps]


def _measure(steps: Measured, field: str) -> tuple[float | None, str | None]:
    col = steps.col(field)
    if col.null_count:
        return None, f"{field} not observed in {col.null_count} of {len(steps)} measured steps"
    return int(pc.sum(col).as_py() or 0) / len(steps), None


def _check(steps: Measured, check: str) -> tuple[float | None, str | None]:
    part = steps.d.findings_table.take(pa.array(steps.findings_of(check), pa.int64()))
    unresolved = np.flatnonzero(step_tables.is_value(step_tables.dict_codes(part["verdict"]), "unresolved"))
    if unresolved.size:
        k = int(unresolved[0])  # the first in measured order
        step_id = steps.d.steps_table["step_id"][int(part["step_row"][k].as_py())].as_py()
        missing = ", ".join(json.loads(part["missing_json"][k].as_py())) or "evidence missing"
        return None, f"{check} unresolved in step {step_id} (missing: {missing})"
    return int(pc.sum(part["explains_ns"]).as_py() or 0) / len(steps), None


def _excess(steps: Measured) -> tuple[dict[str, float], str | None]:
    """Mean excess per cause over the measured steps that have a typical reference."""
    ref = [json.loads(x) for x in steps.col("excess_json").to_pylist() if x is not None]
    if not ref:
        return {}, "no measured step has a typical reference (steps[].excess is null or absent)"
    sums: dict[str, float] = defaultdict(float)
    for ex in ref:
        for cause, ns in (ex.get("by_cause") or {}).items():
            sums[EXCESS_PREFIX + cause] += ns
        sums[EXCESS_PREFIX + UNEXPLAINED] += ex.get("unexplained_ns", 0)
    return {name: total / len(ref) for name, total in sums.items()}, None


def _spans(steps: Measured, spans) -> tuple[dict[str, float], str | None]:
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
    s_lo, s_hi, s_tid = (steps.col(c).to_numpy() for c in ("start_ns", "end_ns", "thread_id"))
    for lo, hi, tid in zip(s_lo.tolist(), s_hi.tolist(), s_tid.tolist()):
        # Spans carry the recorder's clock, as the steps table does; the step's own thread only.
        on = (thread == tid) & (start < hi) & (end > lo)
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
    out[NO_SPAN] = (int(pc.sum(steps.col("wall_ns")).as_py() or 0) - covered_all) / n
    return out, None


def _explained_per_step(steps: Measured, check: str) -> float:
    # Only an attributed finding explains time (the findings table holds 0 for every other).
    return int(steps.d.findings_table["explains_ns"].to_numpy()[steps.findings_of(check)].sum()) / len(steps)


def run_components(diagnosis: Diagnosis | dict, skip_steps: int, spans=None) -> RunComponents:
    """The execution record's `capture.components` for one run's diagnosis (a Diagnosis, or a
    record with its steps inline; and, when given, the run's spans table, to split the host
    thread's step time by span). Read from the diagnosis' steps and findings columns."""
    d = as_diagnosis(diagnosis)
    steps = Measured(d, measured_rows(d, skip_steps))
    diagnosis = d.record
    values: dict[str, float | None] = {}
    unobserved: dict[str, str] = {}
    if not len(steps):
        return RunComponents(statistic="mean", steps=0, values_ns={}, unobserved={"wall": "no measured step in the run's diagnosis"},
                             excess_available=False, spans_available=False, next_experiments=[])

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
    values.update(job_components.components(diagnosis, steps, spans, _measure, _check, _spans))
    excess, why = _excess(steps)
    values.update(excess)
    if why:
        unobserved[EXCESS_PREFIX + "*"] = why
    # The diagnosis's bound per step, over the same measured steps as the values above (the
    # first skip_steps left out): a sum over every step, warm-up included, divided by all
    # steps would compare a once-per-process cost with steady-state components.
    bounds = [StepBound(check=e["check"], bound_ns_per_step=_explained_per_step(steps, e["check"]))
              for e in diagnosis.get("next_experiments", [])]
    return RunComponents(statistic="mean", steps=len(steps), values_ns=values, unobserved=unobserved,
                         excess_available=why is None, spans_available=span_why is None, next_experiments=bounds)


def value_of(components: RunComponents | None, name: str) -> tuple[float | None, str | None]:
    """A run's value of one component, or (None, why). A cause absent from a run whose
    diagnosis has excess by cause had no excess: 0 (only causes with > 0 are listed)."""
    if components is None:
        return None, "the run has no diagnosis"
    vals = components.values_ns
    if name in vals:
        v = vals[name]
        return (v, None) if v is not None else (None, components.unobserved.get(name, "not observed"))
    part = job_components.split(name)[2] if job_components.is_job(name) else name
    for prefix, available in ((EXCESS_PREFIX, components.excess_available), (SPAN_PREFIX, components.spans_available)):
        if part.startswith(prefix):
            if available:
                return 0.0, None
            return None, components.unobserved.get(prefix + "*", f"{prefix[:-1]} components not available")
    return None, f"{name} not in the run's diagnosis"
