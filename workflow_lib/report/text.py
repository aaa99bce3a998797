"""Plain-text lines for terminals: the summary of the view model (`stallcase show INCIDENT`) and
every line a CLI command prints (workflow_lib/commands/ build none of their own)."""

from __future__ import annotations

import json

from ..core.typed import ABSENT
from ..diagnose.stored import next_experiments_of, summary_of
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
    listed = m["diagnosis_tables"].steps([s["index"] for s in m["slow_steps"][:STEPS_SHOWN]])  # rows of the steps table

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
    out = [f"plan {m['plan_digest'][:16]}: experiment {p.experiment or 'none (the incident environment)'}; "
           f"candidate changes: {changes(p.arms.candidate.changes)}"]
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
    est, word = c.estimate, c.verdict.replace("_", " ")
    out.append(f"verdict: {word}  change {pct(est.change_pct)}  "
               f"ratio {ratio(est.ratio)} [{ratio(est.ratio_low)}, {ratio(est.ratio_high)}]  "
               f"noise floor ±{pct_abs(c.noise_floor.pct)}" if c.noise_floor.pct is not None else
               f"verdict: {word}  change {pct(est.change_pct)}  noise floor {DASH}")
    out.append(m["verdict_words"])
    out += [f"  - {r}" for r in c.reasons]
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
    f = g["first_calls"]
    if f is not None:
        out.append(f"one-time first calls: {f['explains'].text()} in {f['steps'].text()} step(s) ({glance.FIRST_CALLS_WHY})")
    return out


def not_observed_line(sources: dict) -> str:
    """'not observed: cupti: not enabled (sources=[...]); nvml: no GPU': each source and its
    reason side by side, so a reason that holds parentheses does not nest inside others."""
    return "not observed: " + "; ".join(f"{n}: {reason(s['reason'])}" for n, s in sorted(sources.items())
                                          if s["status"] != "observed")


def render(m: dict) -> str:
    snap = m["snapshot"]
    lines = [f"incident {m['incident_id']} ({snap.get('producer', 'unknown')}, reason {snap['reason']}), "
             f"snapshot {m['snapshot_digest'][:16]}"]
    lines.append("observed: " + (", ".join(n for n, s in sorted(snap["sources"].items()) if s["status"] == "observed") or "none"))
    if any(s["status"] != "observed" for s in snap["sources"].values()):
        lines.append(not_observed_line(snap["sources"]))
    lines.append("")
    lines += _glance(m) + [""]
    for part in (_diagnosis(m), _plan(m), _trials(m)):
        lines += part + [""]
    return "\n".join(lines).rstrip() + "\n"


# Lines the CLI prints for one record (`stallcase diagnose`, `stallcase collectives`): rendered
# here, beside the terminal summary, so commands only parse arguments, call a stage and print.


def slow_step_lines(rec: dict, limit: int = 10) -> list[str]:
    """The answer to "why was step N slower than usual?" first: each slow step, its excess
    over the typical step and the causes that explain it, largest first."""
    slow = summary_of(rec).slow_steps
    if slow is ABSENT:
        return ["slow steps: not available (diagnosis record without excess attribution)"]
    if not slow:
        return ["slow steps: none at >= 1.5x the typical step"]
    srcs = rec["sources"]  # required in every version, each with its status
    host_only = not any(srcs[n]["status"] == "observed" for n in ("kernels", "cupti") if n in srcs)
    lines = [f"slow steps (>= 1.5x typical; {len(slow)} listed, largest excess first)"
             + ("; host-only evidence (no GPU activity observed):" if host_only else ":")]
    for st in slow[:limit]:
        ex = st.excess_ns
        rank = "" if st.rank is None else f"rank {st.rank} "
        causes = sorted(st.by_cause.items(), key=lambda kv: -kv[1])
        parts = [f"{c} {v / 1e6:.3f} ms ({100 * v / ex:.0f}%)" for c, v in causes]
        if st.unexplained_ns:
            parts.append(f"unexplained {st.unexplained_ns / 1e6:.3f} ms ({100 * st.unexplained_ns / ex:.0f}%)")
        lines.append(f"  {rank}step {st.step_id}: {st.wall_ns / 1e6:.3f} ms vs typical {st.typical_ns / 1e6:.3f} ms "
                     f"(+{ex / 1e6:.3f} ms): " + "; ".join(parts))
        for what, key in (("kernels", "kernels_ns"), ("host spans", "host_spans_ns")):
            grown = getattr(st.grew, key) if st.grew else ABSENT  # the step, or the kind, may name none
            top = list(grown.items())[:3] if grown else []
            if top and any(v >= 0.05 * ex for _, v in top):
                lines.append(f"    {what} that grew: " + ", ".join(f"{n[:60]} +{v / 1e6:.3f} ms" for n, v in top if v >= 0.05 * ex))
    return lines


def collectives_verdict_lines(v: dict) -> list[str]:
    """The hang verdict of a record or of a diagnosis' `collectives` block, first line first."""
    return _hang_lines(v)


def _hang_lines(record: dict) -> list[str]:
    """The collective the job hung on first, then every culprit in collective order (schema 2)."""
    h = record.get("hung_on")
    lines = []
    if h is None:
        lines.append("hung on: nothing (every op some member recorded was completed by its members)"
                     if "hung_on" in record else "hung on: not available (a version-1 record)")
    else:
        who = (", ".join(f"rank {r}" for r in h["culprit_ranks"]) + f" ({'/'.join(h['kinds'])})") if h["culprit_ranks"] \
            else "no rank singled out"
        lines.append(f"hung on: {h['comm']} seq {h['seq']} {h['op']}: {who}")
        if not h["culprit_ranks"]:
            lines.append(f"  {h['reason']}")
    order = record.get("culprit_order") or {}
    if order and not order["exact"]:  # required in a culprit_order
        lines.append(f"  (order across communicators: {order['note']})")
    for c in record.get("culprits", []):
        # a diagnosis's collectives verdict (diagnose/dump_only.verdict) lists culprits without ops_affected
        more = f" (+{c['ops_affected'] - 1} later ops)" if c.get("ops_affected", 1) > 1 else ""
        lines.append(f"  {c['kind']}: rank {c['rank']} at {c['comm']} seq {c['seq']} {c['op']}{more}: {c['evidence'][0]}")
        for m in c["missing"]:
            lines.append(f"    missing: {m}")
    return lines


def _clock_line(record: dict) -> str:
    doms = record["clock_domains"]
    groups: dict[int, list] = {}
    for d in doms:
        groups.setdefault(d["group"], []).append(d)
    if len(groups) <= 1:
        unc = max((d["uncertainty_ns"] or 0 for d in doms), default=0)
        return f"clocks: one domain (+/- {unc / 1e6:.3f} ms)"
    unknown = sorted(d["rank"] for d in doms if d.get("rank") is not None and d.get("hostname") is None)
    return (f"clocks: {len(groups)} domains, host times never compared across them"
            + (f" (ranks without a known host: {unknown})" if unknown else "")
            + "; waits come only from GPU durations there")


def collectives_summary_lines(record: dict, all_ops: bool = False) -> list[str]:
    """`stallcase collectives`: the hang verdict, then per communicator and per op what went wrong."""
    s = record["summary"]
    lines = _hang_lines(record) + [f"ranks: {', '.join(sorted(record['ranks'], key=int)) or 'none'}; ops: {s['ops']} "
             f"(matched {s['matched']}, mismatch {s['mismatch']}, not_joined {s['not_joined']}, "
             f"cannot_decide {s['cannot_decide']}, incomplete_window {s['incomplete_window']}"
             + (f", joined_by_counter {s['joined_by_counter']}" if "joined_by_counter" in s else "") + ")",
             f"attributed {s['attributed']}, not attributed {s['not_attributed']}, unresolved {s['unresolved']}"
             + (f", pending (hang, no wait) {s['pending']}" if "pending" in s else ""), _clock_line(record)]
    for c in record["communicators"]:
        first = c["first_problem"]
        lines.append(f"  {c['comm']}: {c['ops']} ops, members {c['expected_ranks']}"
                     + (f", missing dumps {c['ranks_missing_dump']}" if c["ranks_missing_dump"] else "")
                     + (f", first problem at seq {first['seq_id']} ({first['status']})" if first else ""))
    for op in record["ops"]:
        a = op["attribution"]
        if a and a["verdict"] == "attributed" and (all_ops or "culprits" not in record):
            waits = ", ".join(f"rank {r} {w / 1e6:.2f} ms" for r, w in a["wait_ns"].items())
            lines.append(f"  late: {op['comm']} seq {op['seq_id']} {op['op_type']}: rank {a['late_rank']} "
                         f"({a['method']}); waited: {waits}")
        elif op["status"] == "mismatch":
            for m in op["mismatches"]:
                who = m["culprit_ranks"] if m["decided"] else "cannot decide"
                lines.append(f"  {op['status']}: {op['comm']} seq {op['seq_id']} {m['field']}: culprit {who}")
        elif op["status"] == "not_joined" and "hung_on" not in record:
            for m in op["mismatches"]:
                lines.append(f"  not_joined: {op['comm']} seq {op['seq_id']}: culprit {m['culprit_ranks']}")
    t = record["transport"]
    lines.append(f"transport: {t['transport']}" + (f" ({t['reason']})" if t["reason"] else ""))
    return lines


# The rest of what the CLI prints (workflow_lib/commands/ print these lines and build none).


def summary_text(recs) -> str:
    """`stallcase show INCIDENT`: the plain-text summary of report.Records (no timeline: it needs no tables)."""
    from .model import build

    return render(build(recs, None))


def page_line(path) -> str:
    """`stallcase show --html`: the page's path alone, so a script can open what it prints."""
    return str(path)


def wrote_line(path, detail: str | None = None) -> str:
    return f"wrote {path}" + (f": {detail}" if detail else "")


def recorded_lines(incidents, missing: str | None = None) -> list[str]:
    """`stallcase record` in-process: each incident the run wrote, with its reason (the same
    wording as `python -m workflow_lib.capture.run`), or why there is none."""
    from ..capture.inprocess.runner import describe

    return [describe(p, m) for p, m in incidents] + ([missing] if missing else [])


def diagnosis_lines(rec: dict, out) -> list[str]:
    """`stallcase diagnose`: where the record went, what it explains, the slow steps, the first
    experiments and the warm-up (once, apart from the ranked experiments: a once-per-process
    cost is not a per-step fix). A dump-only incident: the collectives verdict is the diagnosis."""
    if "collectives" in rec:
        return [wrote_line(out, "no steps; collectives only"), *collectives_verdict_lines(rec["collectives"])]
    s = summary_of(rec)
    lines = [wrote_line(out, f"{s.steps} steps, {s.explained_ns / 1e6:.3f} of {s.wall_ns / 1e6:.3f} ms explained"),
             *slow_step_lines(rec)]
    for e in next_experiments_of(rec)[:3]:
        lines.append(f"  {e.rank}. {e.check}: up to {e.recoverable_upper_bound_ns / 1e6:.3f} ms ({e.risk} risk) - {e.candidate_change}")
    w = s.warm_up
    if w is not ABSENT:
        lines.append(f"warm-up: {w.wall_ns / 1e9:.3f} s, once per process ({w.steps} cold first step(s); not ranked)")
    f = s.by_check.get("first_call")  # absent in a record from before the check
    if f and f["attributed_steps"]:
        lines.append(f"one-time first calls: {f['explains_ns'] / 1e6:.3f} ms in {f['attributed_steps']} step(s) "
                     f"({glance.FIRST_CALLS_WHY})")
    return lines


def snapshot_line(out, rec: dict) -> str:
    """`stallcase ingest`: the snapshot record written."""
    return wrote_line(out, f"{len(rec['tables'])} tables, {len(rec['artifacts'])} artifacts")


def workload_line(workload: dict) -> str:
    """`stallcase import --workload`: the command the trials will run."""
    return f"workload: {' '.join(workload['argv'])} (in {workload['cwd']})"


def verify_lines(report, removing: bool) -> list[str]:
    """`stallcase verify`: every corrupt, removed and leftover path, then the counts
    (report: snapshot/verify.py's Report; removing: --clean-temp or --repair was given)."""
    verb = "removed" if removing else "leftover"
    lines = [f"corrupt  {path}: {problem}" for path, problem in report.corrupt]
    lines += [f"removed  {path}: {problem}" for path, problem in report.unreferenced]
    lines += [f"repaired {path}: {problem}" for path, problem in report.repaired]
    lines += [f"cannot repair {path}: {problem}" for path, problem in report.unrepairable]
    lines += [f"{verb:8} {path}: {problem}" for path, problem in report.leftovers]
    lines.append(f"checked {report.objects} store objects, {report.records} records, {report.manifests} incident manifests: "
                 f"{len(report.corrupt)} corrupt, {len(report.leftovers)} leftovers" + (f" ({report.removed} removed)" if report.removed else ""))
    return lines


def config_keys_lines(schema_path, described: list[str]) -> list[str]:
    """`stallcase doctor` without arguments: every configuration key (core/config's describe)."""
    return [f"configuration keys ({schema_path}):", *(f"  {line}" for line in described),
            "", "check a configuration: stallcase doctor config/config.yaml [--config KEY=VALUE ...]"]


def config_ok_lines(checked: list[str], schema_name: str, incident: str | None = None, manifest=None,
                    built_in: bool = False) -> list[str]:
    """`stallcase doctor CONFIG...`: the configuration matches its schema, and where its incident is."""
    lines = [f"ok: {' + '.join(checked) or 'the overrides'} match {schema_name}"]
    if incident is not None:
        lines.append(f"ok: incident {incident!r}: {manifest}" + (" (built in: the workflow records it)" if built_in else ""))
    return lines


def config_file_ok_line(path) -> str:
    """`stallcase check-config FILE`: one file passed."""
    return f"ok {path}"
