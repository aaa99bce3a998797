"""Why it changed: per-component paired estimates, each against its own A/A floor.

Every trial run with `trials.record_runs` carries its own diagnosis, reduced to per-step
components (components.py). For each component this module forms, per used block,

    d_b = median_B(x) - median_A(x)     c_b = median_A'(x) - median_A(x)     (ns per step)

and judges them with verdict.decide, the very rule the headline metric uses: the
Hodges-Lehmann estimate of d with its signed-rank interval, and a floor that is the
largest end of the same interval on c. A component `clears_floor` when its whole interval
lies beyond +/- its floor, exactly as a headline verdict of faster/slower does. Differences
in ns, not log ratios: a component can be 0 (a stall the candidate removed entirely) and
its change must add up with the others.

A component that any successful run in a used block did not observe is `unresolved`, with
the reason; it is never read as 0. Shares of the change are the component's estimate over
the wall-time estimate, for the families that partition time (check:* with unexplained,
span:*, excess:*), and only when the wall time itself moved beyond its floor.
"""

from __future__ import annotations

import math

import numpy as np

from ..trials import components as K
from ..trials import job_components
from ..trials.types import Execution, RunComponents
from . import verdict as V
from .types import ChangeExplained, Comparison, Component, Estimate, Prediction

MEASURED_ARMS = ("A", "B", "A'")
# Families whose components are overlap-free parts of the step (see components.py).
PARTITIONS = ("attribution", "span", "excess")
# At most this many components are named in the sentence, largest change first.
SENTENCE_PARTS = 4
# Parts of the sentence smaller than this fraction of the wall-time change are left out of it.
MIN_SENTENCE_SHARE = 0.01
# The remainders: shown after the named causes.
_REST = (K.UNEXPLAINED, K.NO_SPAN, K.EXCESS_PREFIX + K.UNEXPLAINED)
# A fix "recovered the bound" when its interval reaches this fraction of it: the bound is itself
# measured on the baseline's steps, and a fix that leaves under a tenth of the stall did what the
# diagnosis predicted; below it, the note says how much remains.
RECOVERED_FRACTION = 0.9
# At most this many of the baseline diagnoses' next experiments are held against the outcome.
MAX_PREDICTIONS = 3


def group(name: str) -> str:
    if job_components.is_job(name):  # one role's or rank's part of the job (job_components.py)
        return "job"
    if name == "wall":
        return "wall"
    if name in ("gpu_busy", "host_api"):
        return "measure"
    if name.startswith(K.CHECK_PREFIX) or name == K.UNEXPLAINED:
        return "attribution"
    if name.startswith(K.SPAN_PREFIX):
        return "span"
    return "excess"


_ORDER = {"wall": 0, "measure": 1, "attribution": 2, "span": 3, "excess": 4, "job": 5}


def runs_by_arm(execution: Execution) -> dict[str, list[RunComponents | None]]:
    """Each successful measured run's components (None: the run has no diagnosis)."""
    out: dict[str, list[RunComponents | None]] = {arm: [] for arm in MEASURED_ARMS}
    for run in execution.runs:
        if run.arm in out and run.status == "ok":
            # capture: null when not recorded; its components ABSENT when diagnosing failed
            out[run.arm].append((run.capture.components or None) if run.capture else None)
    return out


def _names(per_block: list[dict[str, list]]) -> list[str]:
    seen: dict[str, None] = {}
    for arms in per_block:
        for comps in arms.values():
            for comp in comps:
                if comp:
                    seen.update(dict.fromkeys(comp.values_ns))
    first = {n: k for k, n in enumerate(seen)}  # the diagnosis's own order within a group
    return sorted(seen, key=lambda n: (_ORDER[group(n)], n == K.UNEXPLAINED, first[n]))


def _block_values(name: str, per_block: list[dict[str, list]]):
    """(A medians, d, c) over the used blocks, or the reason the component is unresolved."""
    meds: list[dict[str, float | None]] = []
    missing, total, why = 0, 0, None
    for arms in per_block:
        med: dict[str, float | None] = {}
        for arm, comps in arms.items():
            vals = []
            for comp in comps:
                v, reason = K.value_of(comp, name)
                total += 1
                if v is None:
                    missing += 1
                    why = why or reason
                else:
                    vals.append(v)
            med[arm] = float(np.median(vals)) if vals else None
        meds.append(med)
    if missing:
        return None, f"not observed in {missing} of {total} runs ({why})"
    med_a = [m["A"] for m in meds]
    d = [m["B"] - m["A"] for m in meds]
    c = [m["A'"] - m["A"] for m in meds if m["A'"] is not None]
    return (med_a, d, c), None


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def estimate(per_block: list[dict[str, list]], confidence: float) -> list[dict]:
    """The comparison's `components[]` for the used blocks' runs (see the module docstring)."""
    names = _names(per_block)
    rows: dict[str, dict] = {}
    resolved: list[tuple[str, list, list, list]] = []
    for name in names:
        got, why = _block_values(name, per_block)
        rows[name] = {"name": name, "label": K.label(name), "group": group(name), "status": "unresolved", "reason": why,
                      "baseline_ns_per_step": None, "delta_ns_per_step": None, "interval_ns": [None, None],
                      "floor_ns": None, "clears_floor": False, "share_of_change": None}
        if got is not None:
            resolved.append((name, *got))
    if resolved and all(len(r[2]) > 0 for r in resolved):
        d = np.asarray([r[2] for r in resolved], dtype=float)
        c_len = {len(r[3]) for r in resolved}
        c = np.asarray([r[3] for r in resolved], dtype=float) if len(c_len) == 1 else None
        try:
            dec = V.decide(d, c if c is not None else np.zeros((len(resolved), 0)), confidence)
        except (FloatingPointError, ArithmeticError, ValueError) as exc:
            for name, *_ in resolved:
                rows[name]["reason"] = f"statistics failed ({exc})"
            return list(rows.values())
        for k, (name, med_a, _, _) in enumerate(resolved):
            est, lo, hi, floor = (float(a[k]) for a in (dec.estimate_log, dec.low_log, dec.high_log, dec.floor_log))
            measured = dec.n_blocks >= dec.min_blocks and dec.n_control_blocks >= dec.min_blocks
            reason = None if measured else (f"{dec.n_blocks} valid blocks, {dec.n_control_blocks} with A' runs: "
                                            f"an interval and a floor need {dec.min_blocks} each")
            rows[name].update(
                status="resolved", reason=reason, baseline_ns_per_step=float(np.median(med_a)), delta_ns_per_step=_num(est),
                interval_ns=[_num(lo), _num(hi)], floor_ns=_num(floor),
                clears_floor=bool(measured and (lo > floor or hi < -floor)))
    wall = rows.get("wall")
    if wall and wall["clears_floor"] and wall["delta_ns_per_step"]:
        for row in rows.values():
            if row["status"] == "resolved" and row["group"] in PARTITIONS + ("wall",):
                row["share_of_change"] = row["delta_ns_per_step"] / wall["delta_ns_per_step"]
    return list(rows.values())


def change_explained(rows: list[dict]) -> dict:
    """How much of the wall-time change the causes account for, and what is left."""
    by = {r["name"]: r for r in rows}
    wall = by.get("wall")
    claimed = [r for r in rows if r["group"] == "attribution" and r["name"] != K.UNEXPLAINED and r["clears_floor"]
               and r["share_of_change"] is not None]
    spans = [r for r in rows if r["group"] == "span" and r["name"] != K.NO_SPAN and r["clears_floor"]
             and r["share_of_change"] is not None]
    unexplained = by.get(K.UNEXPLAINED)
    return {
        "wall_delta_ns_per_step": wall["delta_ns_per_step"] if wall else None,
        "attributed_share": sum(r["share_of_change"] for r in claimed) if claimed else None,
        "unexplained_share": unexplained["share_of_change"] if unexplained else None,
        "span_share": sum(r["share_of_change"] for r in spans) if spans else None,
        "unresolved": [r["name"] for r in rows if r["status"] == "unresolved"],
    }


def predictions(per_block: list[dict[str, list]], rows: list[dict]) -> list[dict]:
    """The baseline runs' own next experiments (their recoverable bound per step) beside the
    realized change of that cause, and where the rest of the time went."""
    bounds: dict[str, list[float]] = {}
    a_runs = [comp for arms in per_block for comp in arms["A"] if comp]
    for comp in a_runs:
        for e in comp.next_experiments:
            bounds.setdefault(e.check, [])
    for check in bounds:
        for comp in a_runs:
            got = [e.bound_ns_per_step for e in comp.next_experiments if e.check == check]
            bounds[check].append(got[0] if got else 0.0)
    by = {r["name"]: r for r in rows}
    ranked = sorted(((float(np.median(v)), c) for c, v in bounds.items()), key=lambda t: (-t[0], t[1]))
    return [_prediction(check, bound, by) for bound, check in ranked[:MAX_PREDICTIONS] if bound > 0]


def _prediction(check: str, bound: float, by: dict[str, dict]) -> dict:
    name = K.CHECK_PREFIX + check
    row, wall = by.get(name), by.get("wall")
    out = {"check": check, "component": name, "bound_ns_per_step": bound, "recovered_ns_per_step": None,
           "recovered_interval_ns": [None, None], "wall_recovered_ns_per_step": None, "outcome": "unresolved",
           "moved_to": [], "note": ""}
    if row is None or row["status"] != "resolved" or wall is None or wall["status"] != "resolved":
        out["note"] = f"{K.label(name)}: {(row or {}).get('reason') or 'not measured in the trial runs'}"
        return out
    lo, hi = row["interval_ns"]
    out.update(recovered_ns_per_step=-row["delta_ns_per_step"],
               recovered_interval_ns=[None if hi is None else -hi, None if lo is None else -lo],
               wall_recovered_ns_per_step=-wall["delta_ns_per_step"])
    # Time moved to another cause: only meaningful when this cause gave time up.
    moved = sorted((r for r in by.values() if r["group"] == "attribution" and r["name"] != name and r["clears_floor"]
                    and r["delta_ns_per_step"] > 0), key=lambda r: -r["delta_ns_per_step"])
    if not (row["clears_floor"] and row["delta_ns_per_step"] < 0):
        moved = []
    out["moved_to"] = [r["name"] for r in moved]
    what = K.label(name)
    if not row["clears_floor"]:
        out["outcome"] = "cause_unchanged"
        out["note"] = f"{what} did not move beyond its floor; the predicted {fmt_ns(bound)}/step was not recovered"
    elif row["delta_ns_per_step"] > 0:
        out["outcome"] = "cause_grew"
        out["note"] = f"{what} grew by {fmt_ns(row['delta_ns_per_step'])}/step"
    else:
        reach = out["recovered_interval_ns"][1]
        out["outcome"] = "recovered_bound" if reach is not None and reach >= RECOVERED_FRACTION * bound else "less_than_bound"
        gone = -row["delta_ns_per_step"]
        out["note"] = f"{what} recovered {fmt_ns(gone)}/step of a predicted {fmt_ns(bound)}/step ({gone / bound:.0%})"
        if out["outcome"] == "less_than_bound":
            out["note"] += "; less than the bound: part of the stall remains (overlapping stalls hold the same time)"
    if moved:
        out["note"] += "; time moved to " + ", ".join(
            f"{r['label']} (+{fmt_ns(r['delta_ns_per_step'])}/step)" for r in moved)
    return out


# --- the sentence ---------------------------------------------------------------------


def _decimals(x: float, sig: int) -> int:
    return max(0, sig - 1 - math.floor(math.log10(abs(x)))) if x else 0


def _signed(x: float, decimals: int) -> str:
    text = f"{abs(x):.{decimals}f}"
    return ("−" if x < 0 and float(text) != 0 else "+") + text


def fmt_ns(ns: float) -> str:
    unit, div = _unit(abs(ns))
    return f"{ns / div:.{_decimals(ns / div, 3)}f} {unit}"


def _unit(scale: float) -> tuple[str, float]:
    for unit, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if scale >= div:
            return unit, div
    return "ns", 1.0


def _headline(est: Estimate, verdict: str) -> str:
    pct, lo, hi = est.change_pct, est.ratio_low, est.ratio_high
    if pct is None:
        return verdict.replace("_", " ")
    if verdict in ("faster", "slower") and lo is not None and hi is not None:
        sign = -1.0 if verdict == "faster" else 1.0
        ends = sorted(sign * (r - 1.0) * 100.0 for r in (lo, hi))
        n = _decimals(abs(pct), 2)
        return f"{verdict} by {abs(pct):.{n}f}% [{ends[0]:.{n}f}, {ends[1]:.{n}f}]"
    n = _decimals(max(abs(pct), 0.01), 2)
    span = f" [{_signed((lo - 1) * 100, n)}, {_signed((hi - 1) * 100, n)}]" if lo is not None and hi is not None else ""
    return f"{verdict.replace('_', ' ')} ({_signed(pct, n)}%{span})"


def _part(row: dict, unit: str, div: float, decimals: int) -> str:
    if row["status"] != "resolved":
        return f"{row['label']} unresolved"
    text = f"{row['label']} {_signed(row['delta_ns_per_step'] / div, decimals)} {unit}/step"
    lo, hi = row["interval_ns"]
    if not row["clears_floor"]:
        return text + " (within its floor)"
    return text + f" [{_signed(lo / div, decimals)}, {_signed(hi / div, decimals)}]"


def sentence(est: Estimate, verdict: str, valid_blocks: int, rows: list[dict], preds: list[dict],
             no_rows: str | None = None) -> str:
    head = _headline(est, verdict)
    if not valid_blocks:
        return head + ": no valid block, so no component either"
    if not rows:
        return head + f": no per-run components ({no_rows or 'no run was diagnosed'})"
    wall = next((r for r in rows if r["name"] == "wall"), None)
    # Named causes first, largest change first; the unexplained rest last. A part too small
    # to matter (under MIN_SENTENCE_SHARE of the wall change) stays in components[] only.
    least = MIN_SENTENCE_SHARE * abs((wall or {}).get("delta_ns_per_step") or 0.0)
    cleared = sorted((r for r in rows if r["group"] in PARTITIONS and r["clears_floor"] and r["name"] not in _REST
                      and abs(r["delta_ns_per_step"]) >= least),
                     key=lambda r: -abs(r["delta_ns_per_step"]))[:SENTENCE_PARTS]
    rest = [r for r in rows if r["name"] in _REST and r["clears_floor"] and abs(r["delta_ns_per_step"]) >= least]
    predicted = [next((r for r in rows if r["name"] == p["component"]), None) for p in preds]
    extra = [r for r in predicted if r is not None and r not in cleared]
    shown = cleared + extra[: max(1, SENTENCE_PARTS - len(cleared))] + rest[:1]
    if not shown:
        return head + ": no component moved beyond its own A/A floor"
    scale = max((abs(r["delta_ns_per_step"]) for r in shown if r["status"] == "resolved"), default=0.0)
    unit, div = _unit(scale)
    decimals = _decimals(scale / div, 3) if scale else 1
    return head + ": " + "; ".join(_part(r, unit, div, decimals) for r in shown)


def explain(est: Estimate, verdict: str, valid_blocks: int, per_block: list[dict[str, list]], confidence: float,
            no_rows: str | None = None) -> dict:
    """Comparison's explanation fields (components, change_explained, predictions, sentence),
    from the used blocks' runs; the rows are worked on as dicts and typed once, here. `no_rows`
    says why no run has components, when none has (compare/build.py knows the real reason)."""
    rows = estimate(per_block, confidence)
    preds = predictions(per_block, rows)
    by_part = job_sentence(rows)
    return {"components": [Component(**r) for r in rows], "change_explained": ChangeExplained(**change_explained(rows)),
            "predictions": [Prediction(**p) for p in preds],
            "sentence": sentence(est, verdict, valid_blocks, rows, preds, no_rows) + (f"; by {by_part}" if by_part else "")}


def job_sentence(rows: list[dict]) -> str | None:
    """'role: consumer input wait -11.2 ms/step [...]; producer span pack did not move': per role
    (or rank), the attribution or span part that moved most beyond its own floor, else the
    role's largest part at baseline, which did not move."""
    parts: dict[str, list[dict]] = {}
    for r in rows:
        if r["group"] == "job" and r["status"] == "resolved":
            kind, who, rest = job_components.split(r["name"])
            if rest != "wall" and not rest.endswith(("unexplained", "(none)")):
                parts.setdefault(f"{kind}:{who}", []).append(r)
    if not parts:
        return None
    out = []
    for key, rs in sorted(parts.items()):
        moved = [r for r in rs if r["clears_floor"]]
        if moved:
            r = max(moved, key=lambda r: abs(r["delta_ns_per_step"]))
            out.append(_part(r, "ms", 1e6, 2))
        else:
            r = max(rs, key=lambda r: r["baseline_ns_per_step"] or 0.0)
            out.append(f"{r['label']} did not move (within its floor)")
    kind = "role" if all(k.startswith("role:") for k in parts) else "rank"
    return f"{kind}: " + "; ".join(out)


# --- printing (examples/gpu/h200_demo_pipeline.sh; anyone with a comparison.json) ------------


def _ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:+.4f}"


def describe(comparison: Comparison) -> str:
    """Plain-text summary of a comparison's verdict and components."""
    est, floor, mde = comparison.estimate, comparison.noise_floor, comparison.mde
    lines = [f"verdict {comparison.verdict}: ratio {est.ratio} [{est.ratio_low}, {est.ratio_high}], "
             f"floor {floor.pct}%, mde {mde.pct}%", *(f"  reason: {r}" for r in comparison.reasons)]
    lines.append(f"  {comparison.sentence}")
    for r in comparison.components:
        if r.status == "resolved":
            lo, hi = (_ms(v) for v in r.interval_ns)
            share = "" if r.share_of_change is None else f" share {r.share_of_change:.1%}"
            state = "CLEARS" if r.clears_floor else "within"
            lines.append(f"  {r.name:<28} {_ms(r.delta_ns_per_step)} ms/step [{lo}, {hi}] "
                         f"floor ±{_ms(r.floor_ns).lstrip('+')} {state}{share}")
        else:
            lines.append(f"  {r.name:<28} unresolved: {r.reason}")
    lines += [f"  predicted {p.check}: {p.outcome}: {p.note}" for p in comparison.predictions]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from ..core import typed

    for path in sys.argv[1:]:
        print(path)
        print(describe(typed.read(path, Comparison)))
