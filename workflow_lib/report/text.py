"""Plain-text summary of the view model for terminals (`stallcase show INCIDENT`)."""

from __future__ import annotations

import json

from . import glance
from .fmt import DASH, changes, ns, pct, pct_abs, ratio, reason
from .html import MEASURE_SOURCE, _reason
from .model import MEASURES, SLOW_FACTOR

STEPS_SHOWN = 5
"""Slow steps detailed in the terminal; the HTML report lists more."""


def _measure(st: dict, key: str) -> str:
    return ns(st[key]) if st[key] is not None else "not observed"


def _absent_reasons(steps: list[dict], sources: dict) -> list[str]:
    """'label, label: not observed: reason' once per reason (not on every step's line)."""
    absent: dict[str, list[str]] = {}
    for st in steps:
        for key, label, _ in MEASURES:
            if st[key] is None:
                labels = absent.setdefault(_reason(sources, MEASURE_SOURCE[key]), [])
                if label not in labels:
                    labels.append(label)
    return [f"  {', '.join(labels)}: not observed: {reason}" for reason, labels in absent.items()]


def _diagnosis(m: dict) -> list[str]:
    d = m["diagnosis"]
    if d is None:
        return ["diagnosis: not run yet (diagnosis.json absent)"]
    sm = d["summary"]
    out = [f"diagnosis: {sm['steps']} steps, wall {ns(sm['wall_ns'])}" + (
        f", explained {ns(sm['explained_ns'])}, unexplained {ns(sm['unexplained_ns'])}" if sm["explained_ns"] else
        ", no time attributed to a cause"), ""]
    out.append(f"slowest steps (* = over {SLOW_FACTOR}x the rank's median):")
    listed = [d["steps"][s["index"]] for s in m["slow_steps"][:STEPS_SHOWN]]

    def unresolved(st):
        return {(f["check"], "; ".join(f["missing"])) for f in st["findings"] if f["verdict"] == "unresolved"}

    # An unresolved finding with the same missing evidence in every listed step is said once.
    common = set.intersection(*(unresolved(st) for st in listed)) if listed else set()
    out += _absent_reasons(listed, d["sources"])
    for s, st in zip(m["slow_steps"], listed):
        rank = "" if st["rank"] is None else f" rank {st['rank']}"
        out.append(f"  {'*' if s['slow'] else ' '} step {st['step_id']}{rank}: {s['ratio_to_median']:.2f}x median")
        for key, label, _ in MEASURES:
            out.append(f"      {label:<11} {_measure(st, key)}")
        for f in st["findings"]:
            if f["verdict"] == "attributed":
                out.append(f"      + {f['check']}: attributed, explains {ns(f['explains_ns'])}")
        for check, missing in sorted(unresolved(st) - common):
            out.append(f"      ? {check}: unresolved, missing {missing}")
    if common:
        out.append("  unresolved in every step above, for want of:")
        out += [f"    ? {check}: {missing}" for check, missing in sorted(common)]
    out.append("")
    if d["next_experiments"]:
        out.append("next experiments:")
        for e in d["next_experiments"]:
            out.append(f"  {e['rank']}. {e['check']} (recovers at most {ns(e['recoverable_upper_bound_ns'])}, "
                       f"risk {e['risk']}): {e['candidate_change']}")
    else:
        out.append("next experiments: none ranked (no finding attributed; see the missing evidence above)")
    return out


def _plan(m: dict) -> list[str]:
    p = m["plan"]
    if p is None:
        return ["plan: not made yet (plan.json absent)"]
    out = [f"plan {m['plan_digest'][:16]}: experiment {p['experiment'] or 'none (the incident environment)'}; "
           f"candidate changes: {changes(p['arms']['candidate']['changes'])}"]
    counts: dict[str, int] = {}
    for pf in m["preflights"].values():
        counts[pf["status"]] = counts.get(pf["status"], 0) + 1
    if counts:
        out.append("preflight: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for b, pf in m["preflights"].items():
        for d in pf["differences"]:
            out.append(f"  {b} difference {d['field']}: planned {json.dumps(d['planned'])}, observed {json.dumps(d['observed'])}")
    return out


def _trials(m: dict) -> list[str]:
    c = m["comparison"]
    out = []
    if m["trials"]:
        ok = sum(1 for b in m["trials"] for r in b["runs"] if r["status"] == "ok")
        failed = sum(1 for b in m["trials"] for r in b["runs"] if r["status"] != "ok")
        out.append(f"trials: {len(m['trials'])} blocks, {ok} runs ok, {failed} failed attempts")
    if c is None:
        return out + ["comparison: not run yet (comparison.json absent)"]
    est = c["estimate"]
    out.append(f"verdict: {c['verdict'].replace('_', ' ')}  change {pct(est['change_pct'])}  "
               f"ratio {ratio(est['ratio'])} [{ratio(est['ratio_low'])}, {ratio(est['ratio_high'])}]  "
               f"noise floor ±{pct_abs(c['noise_floor']['pct'])}" if c["noise_floor"]["pct"] is not None else
               f"verdict: {c['verdict'].replace('_', ' ')}  change {pct(est['change_pct'])}  noise floor {DASH}")
    out.append(m["verdict_words"])
    out += [f"  - {r}" for r in c["reasons"]]
    return out


def _causes(causes, unexplained) -> str:
    parts = [f"{c} {x.text()}" for c, x in causes]
    if unexplained is not None and unexplained.value:
        parts.append(f"unexplained {unexplained.text()}")
    return ", ".join(parts)


def _glance(m: dict) -> list[str]:
    """The first screen in words: verdict, why the slow steps were slow, what next."""
    g = m["glance"]
    out = ["verdict: " + (glance.verdict_text(g["verdict"]) if g["verdict"] else "no comparison yet (comparison.json absent)")]
    if g["verdict"] and g["verdict"]["sentence"]:
        out.append("  " + g["verdict"]["sentence"])
    for c in g["components"] or []:
        iv = f" [{c['low'].text()}, {c['high'].text()}]" if c["low"] and c["high"] else ""
        out.append(f"  {c['name']}: {c['delta'].text()}/step{iv}" + ("" if c["clears"] else " (within its floor)"))
    x = g["excess"]
    if x["kind"] == "excess":
        out.append(f"slow steps: {x['count']} of {x['steps'].text()} at least 1.5x their typical time")
        for r in x["rows"]:
            rank = "" if r["rank"] is None else f" rank {r['rank'].text()}"
            out.append(f"  step {r['step_id'].text()}{rank}: {r['wall'].text()} vs typical {r['typical'].text()}, "
                       f"excess {r['excess'].text()}: " + (_causes(r["causes"], r["unexplained"]) or "no cause attributed"))
    elif x["kind"] == "slowest":
        rank = "" if x["rank"] is None else f" rank {x['rank'].text()}"
        out.append(f"slowest step: step {x['step_id'].text()}{rank} took {x['wall'].text()}, {x['ratio']:.2f}x its rank's median")
        out.append("  " + (_causes(x["causes"], x["unexplained"]) if x["causes"] else
                           "no cause attributed; the checks lacked: " + "; ".join(x["missing"])))
    nx = g["next"]
    if nx["kind"] == "ranked":
        out.append(f"next experiment: {nx['change']} ({nx['check']}; recovers at most {nx['recovers'].text()}, risk {nx['risk']})")
    elif nx["kind"] == "none":
        out.append("next experiment: none ranked; capture first: " + ("; ".join(nx["missing"]) or "more of the incident"))
    w = g.get("warm_up")
    if w is not None:
        out.append(f"warm-up: {w['wall'].text()}, once per process ({w['steps'].text()} cold first step(s), "
                   f"{w['over'].text()} over the typical step; not ranked)")
    return out


def render(m: dict) -> str:
    snap = m["snapshot"]
    lines = [f"incident {m['incident_id']} ({snap.get('producer', 'unknown')}, reason {snap['reason']}), "
             f"snapshot {m['snapshot_digest'][:16]}"]
    not_obs = [f"{n} ({reason(s.get('reason'))})" for n, s in sorted(snap["sources"].items()) if s["status"] != "observed"]
    lines.append("observed: " + (", ".join(n for n, s in sorted(snap["sources"].items()) if s["status"] == "observed") or "none"))
    if not_obs:
        lines.append("not observed: " + "; ".join(not_obs))
    lines.append("")
    lines += _glance(m) + [""]
    for part in (_diagnosis(m), _plan(m), _trials(m)):
        lines += part + [""]
    return "\n".join(lines).rstrip() + "\n"
