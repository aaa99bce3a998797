"""The first screen's content: what happened, why, what the trials concluded, what to try next.

Built from the records only. Every number is a `Num(value, unit, src)` (a record field and
its JSON pointer), rendered by html.py as a checked `data-src` span and by text.py for the
terminal; the Snakefile's onsuccess prints `verdict_line`.

The first screen reads the diagnosis record's summary (its slow steps carry their findings);
the steps table is read only for the slowest step of a record without slow steps, and the
findings table for the evidence unresolved checks lacked, by a count over its codes.

The comparison is a typed record (compare/types.py Comparison, older versions upgraded or
refused in core/records.py's upgrade) and is read by attribute only. So are the diagnosis's
summary and next experiments (stored.Diagnosis.summary / .next_experiments, frozen classes of
diagnose/types.py, read from the record as load_diagnosis upgraded it): a version-1 record has
no slow steps (typed.ABSENT) and falls back to the best summary it holds, and never headlines
"explained 0 ns" (a diagnosis that attributed nothing says which evidence it lacked).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..compare.types import Comparison
from ..compare.verdict import VERDICT_HEADLINES, VERDICT_WORDS
from ..diagnose import step_tables
from ..core.typed import ABSENT
from ..diagnose.stored import Diagnosis
from ..diagnose.types import Grew
from . import fmt
from ..plan.types import Plan

SLOW_LISTED = 3
"""Slow steps shown on the first screen (the largest excess first); the diagnosis section lists more."""
MISSING_LISTED = 3
"""Pieces of missing evidence named when nothing was attributed (the most common first)."""
COMPONENTS_LISTED = 5
"""Components of the change shown on the first screen (the record keeps all)."""


@dataclass(frozen=True)
class Num:
    """A shown number: the record's value, how to format it (fmt.FORMATTERS) and where it is."""

    value: object
    unit: str
    src: str

    def text(self) -> str:
        return fmt.text_of(self.value, self.unit)


def _tok(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _num_or_none(value, unit: str, src: str) -> Num | None:
    return None if value is None else Num(value, unit, src)


def verdict(comparison: Comparison | None) -> dict | None:
    if comparison is None:
        return None
    est, floor, counts, v = comparison.estimate, comparison.noise_floor, comparison.counts, comparison.verdict
    seq = comparison.sequential or None  # absent: a fixed design
    return {"verdict": v, "word": VERDICT_WORDS.get(v, fmt.name(v)), "headline": VERDICT_HEADLINES.get(v, ""),
            "metric": comparison.metric.label or comparison.metric.name.replace("_", " "),
            # stop: early: the stopping look's interval is at its own (higher) level
            "confidence": seq.level if seq else comparison.design.confidence,
            "change": _num_or_none(est.ratio, "ratio_pct", "comparison:/estimate/ratio"),
            "low": _num_or_none(est.ratio_low, "ratio_pct", "comparison:/estimate/ratio_low"),
            "high": _num_or_none(est.ratio_high, "ratio_pct", "comparison:/estimate/ratio_high"),
            "floor": _num_or_none(floor.pct, "pct_abs", "comparison:/noise_floor/pct"),
            "valid": Num(counts.valid_blocks, "count", "comparison:/counts/valid_blocks"),
            "planned": Num(counts.planned_blocks, "count", "comparison:/counts/planned_blocks"),
            "aa": comparison.aa_experiment,
            "sentence": comparison.sentence,
            "reason": comparison.reasons[0] if comparison.reasons else None,
            "sequential": seq.to_json() if seq else None, "warnings": list(comparison.warnings or [])}


def components(comparison: Comparison | None) -> list[dict] | None:
    """The explained change, component by component; None when the record has none."""
    if comparison is None or not comparison.components:
        return None
    # The overlap-free partitions explain the change; the wall is the headline and the measures
    # overlap them. Causes first, then the excess split and named spans; larger changes first.
    order = {"attribution": 0, "excess": 1, "span": 2}
    ranked = sorted(((i, c) for i, c in enumerate(comparison.components) if c.group in order),
                    key=lambda ic: (order[ic[1].group], -abs(ic[1].delta_ns_per_step or 0)))
    out = []
    for i, c in ranked[:COMPONENTS_LISTED]:
        base = f"comparison:/components/{i}"
        low, high = c.interval_ns
        out.append({"name": c.label or fmt.name(c.name.split(":", 1)[-1]),
                    "delta": Num(c.delta_ns_per_step, "ns_signed", f"{base}/delta_ns_per_step"),
                    "low": _num_or_none(low, "ns_signed", f"{base}/interval_ns/0"),
                    "high": _num_or_none(high, "ns_signed", f"{base}/interval_ns/1"),
                    "floor": _num_or_none(c.floor_ns, "ns", f"{base}/floor_ns"),
                    "share": _num_or_none(c.share_of_change, "share", f"{base}/share_of_change"),
                    "clears": c.clears_floor, "status": c.status})
    return out


def _causes(by_cause: dict, base: str) -> list[tuple[str, Num]]:
    return [(fmt.name(k), Num(v, "ns", f"{base}/by_cause/{_tok(k)}"))
            for k, v in sorted(by_cause.items(), key=lambda kv: -kv[1]) if v]


NAME_SHOWN = 48
"""Characters of a kernel or span name shown on the first screen (mangled C++ names run to hundreds)."""
GREW_KINDS = (("kernels_ns", "kernel"), ("host_spans_ns", "span"))


def _grew(grew: Grew, base: str) -> list[tuple[str, Num]]:
    """The kernels and host spans whose time in the step grew most (the diagnosis names at most a
    few); `grew` ABSENT (the step records none) or either map ABSENT lists nothing."""
    out = [(f"{word} {name if len(name) <= NAME_SHOWN else name[:NAME_SHOWN - 1] + '…'}",
             Num(v, "ns_signed", f"{base}/grew/{key}/{_tok(name)}"))
           for key, word in GREW_KINDS if grew and getattr(grew, key)
           for name, v in getattr(grew, key).items()]
    return sorted(out, key=lambda p: -abs(p[1].value or 0))[:2]


def _missing_evidence(diag: Diagnosis, rows=None) -> list[str]:
    """The evidence the unresolved findings (of step `rows`; None: all) lack, the most often
    lacking first: a count per distinct `missing` list (the findings table's codes), each list
    read once, in the order the findings first name them."""
    f = diag.findings_table
    verdict, check = step_tables.dict_codes(f["verdict"]), step_tables.dict_codes(f["check"])
    sel = step_tables.is_value(verdict, "unresolved")
    # A single-rank incident cannot have other ranks' traces: that gap is not actionable here.
    ranks = diag.steps_table["rank"].fill_null(-1).to_numpy()
    if np.unique(ranks).size <= 1:
        sel &= ~step_tables.is_value(check, "collective_wait")
    if rows is not None:
        sel &= np.isin(f["step_row"].to_numpy(), np.asarray(rows, np.int64))
    codes, lists = step_tables.dict_codes(f["missing_json"])
    codes = codes[sel]
    if codes.size == 0:
        return []
    uniq, first, n = np.unique(codes, return_index=True, return_counts=True)
    counts: Counter = Counter()
    for k in np.argsort(first, kind="stable"):
        for m in json.loads(lists[uniq[k]]):
            counts[m] += int(n[k])
    return [m for m, _ in counts.most_common(MISSING_LISTED)]


def excess(diag: Diagnosis | None, slow: list[dict]) -> dict:
    """Why the slow steps were slow.

    With the delay attribution: each slow step's excess over its typical wall, split by cause.
    Without it: the slowest step against its rank's median and the findings attributed there,
    or, when none was, the evidence the checks lacked.
    """
    if diag is None:
        return {"kind": "absent", "reason": "diagnosis.json absent: run the diagnose stage"}
    listed = diag.summary.slow_steps
    n_steps = Num(diag.summary.steps, "count", "diagnosis:/summary/steps")
    if listed is not ABSENT:
        rows = []
        for i, s in enumerate(listed[:SLOW_LISTED]):
            base = f"diagnosis:/summary/slow_steps/{i}"
            rows.append({"step_id": Num(s.step_id, "id", f"{base}/step_id"),
                         "rank": None if s.rank is None else Num(s.rank, "id", f"{base}/rank"),
                         "wall": Num(s.wall_ns, "ns", f"{base}/wall_ns"),
                         "typical": Num(s.typical_ns, "ns", f"{base}/typical_ns"),
                         "excess": Num(s.excess_ns, "ns", f"{base}/excess_ns"),
                         "causes": _causes(s.by_cause, base),
                         "unexplained": Num(s.unexplained_ns, "ns", f"{base}/unexplained_ns"),
                         "excess_ns": s.excess_ns, "grew": _grew(s.grew, base)})
        return {"kind": "excess", "rows": rows, "count": len(listed), "steps": n_steps,
                "missing": _missing_evidence(diag) if rows and not any(r["causes"] for r in rows) else []}
    if not slow:
        return {"kind": "no_steps", "steps": n_steps}
    top = slow[0]
    i = top["index"]
    st = diag.step(i)
    attributed = [(fmt.name(f["check"]), Num(f["explains_ns"], "ns", f"diagnosis:/steps/{i}/findings/{j}/explains_ns"))
                  for j, f in enumerate(st["findings"]) if f["verdict"] == "attributed" and f["explains_ns"] > 0]
    attributed.sort(key=lambda p: -p[1].value)
    return {"kind": "slowest", "steps": n_steps,
            "step_id": Num(st["step_id"], "id", f"diagnosis:/steps/{i}/step_id"),
            "rank": None if st["rank"] is None else Num(st["rank"], "id", f"diagnosis:/steps/{i}/rank"),
            "wall": Num(st["wall_ns"], "ns", f"diagnosis:/steps/{i}/wall_ns"),
            "ratio": top["ratio_to_median"], "median_ns": top["median_ns"], "slow": top["slow"],
            "causes": attributed,
            "unexplained": Num(st["unexplained_ns"], "ns", f"diagnosis:/steps/{i}/unexplained_ns") if attributed else None,
            "missing": [] if attributed else _missing_evidence(diag, [i])}


def next_experiment(diag: Diagnosis | None, plan: Plan | None) -> dict:
    """The ranked next experiment (the first; the rest are in the diagnosis section)."""
    tried = fmt.changes(plan.arms.candidate.changes) if plan else None
    if diag is None:
        return {"kind": "absent", "tried": tried}
    exps = diag.next_experiments
    if not exps:
        return {"kind": "none", "tried": tried, "missing": _missing_evidence(diag)}
    e = exps[0]
    return {"kind": "ranked", "tried": tried, "check": fmt.name(e.check), "change": e.candidate_change,
            "recovers": Num(e.recoverable_upper_bound_ns, "ns", "diagnosis:/next_experiments/0/recoverable_upper_bound_ns"),
            "steps": Num(e.steps, "count", "diagnosis:/next_experiments/0/steps"), "risk": e.risk,
            "more": len(exps) - 1}


def warm_up(diag: Diagnosis | None) -> dict | None:
    """The cold first steps' cost, said once and apart from the ranked experiments
    ("warm-up: 1.6 s, once per process"); None when no step was cold (or an older record)."""
    w = diag.summary.warm_up if diag is not None else ABSENT
    if w is ABSENT:
        return None
    return {"wall": Num(w.wall_ns, "ns", "diagnosis:/summary/warm_up/wall_ns"),
            "steps": Num(w.steps, "count", "diagnosis:/summary/warm_up/steps"),
            "over": Num(w.over_typical_ns, "ns", "diagnosis:/summary/warm_up/over_typical_ns"),
            "step_ids": list(w.step_ids)}


def first_calls(diag: Diagnosis | None) -> dict | None:
    """The one-time first calls after warm-up (checks/first_call.py), said once beside the
    warm-up and apart from the ranked experiments, as it is never ranked ("one-time first calls:
    41.6 s in 1 step"); None where the check attributed nothing (or an older record)."""
    b = diag.summary.by_check.get("first_call") if diag is not None else None  # absent before the check existed
    if not b or not b["attributed_steps"]:
        return None
    return {"explains": Num(b["explains_ns"], "ns", "diagnosis:/summary/by_check/first_call/explains_ns"),
            "steps": Num(b["attributed_steps"], "count", "diagnosis:/summary/by_check/first_call/attributed_steps")}


FIRST_CALLS_WHY = ("an op's first call in the recording far over its later calls, lazy init such as a kernel module "
                   "loaded or a handle built: warm it up before the timed region; not a per-step fix, not ranked")


def build(m: dict) -> dict:
    """The first screen from the view model (model.build)."""
    return {"verdict": verdict(m["comparison"]), "components": components(m["comparison"]),
            "excess": excess(m["diagnosis_tables"], m["slow_steps"]),
            "next": next_experiment(m["diagnosis_tables"], m["plan"]),
            "warm_up": warm_up(m["diagnosis_tables"]), "first_calls": first_calls(m["diagnosis_tables"])}


def verdict_text(v: dict) -> str:
    """'Faster: step time −75.0% [−75.0%, −74.9%] (95% interval), noise floor ±0.869%, 20 of 20 blocks'
    from verdict()."""
    parts = [v["word"]]
    if v["change"] is not None:
        change = f"{v['metric']} {v['change'].text()}"
        if v["low"] is not None and v["high"] is not None:
            change += f" [{v['low'].text()}, {v['high'].text()}] ({v['confidence']:.0%} interval)"
        parts.append(change)
    parts.append(f"noise floor ±{v['floor'].text()}" if v["floor"] is not None else "noise floor not measured")
    parts.append(f"{v['valid'].text()} of {v['planned'].text()} blocks")
    if v.get("sequential"):
        s = v["sequential"]
        parts[-1] += f" (stop: early, look {s['look']} of {s['looks_planned']}, limit {s['block_limit']})"
    return ": ".join(parts[:2]) + (", " + ", ".join(parts[2:]) if len(parts) > 2 else "")


def verdict_line(comparison: Comparison | None, incident: str) -> str:
    """One line for the end of a workflow run (and the top of `stallcase show`)."""
    if comparison is None:
        return f"{incident}: no comparison yet (comparison.json absent)"
    v = verdict(comparison)
    why = f"; {comparison.failure_summary}" if comparison.failure_summary else ""
    why += "".join(f"; {w}" for w in comparison.warnings or [])
    return f"{incident}: {verdict_text(v)}" + (" (A/A experiment)" if v["aa"] else "") + why
