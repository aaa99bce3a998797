"""The self-contained HTML page: inline CSS and script, data as JSON, no network at view time.

A Content-Security-Policy forbids every fetch (default-src 'none'), so a page that tried to
load anything would fail loudly in the browser instead of silently needing a network.
"""

from __future__ import annotations

import json

from . import html_glance, palette, plots, why_changed
from .assets import CSS, JS
from .fmt import DASH, changes, esc, num, plain, reason, short
from .fmt import name as fmt_name
from .model import MEASURES, SLOW_FACTOR, environment_rows
from .timeline import SOURCE_ALIASES
from ..diagnose.step_tables import NOT_KEPT
from ..plan.types import Design

LIST_SHOWN = 6
"""Items of an evidence list (or of what is missing) shown per finding; the record keeps all."""
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
MEASURE_SOURCE = {"kernel_sum_ns": "kernels", "busy_ns": "kernels", "host_api_ns": "runtime_api"}


def _json_script(obj) -> str:
    # "</" would end the script element; JSON allows "<\/" as the same string.
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def _reason(sources: dict, table: str) -> str:
    """Why a measure is absent, from the record's sources (recorder or table names)."""
    for name in SOURCE_ALIASES.get(table, (table,)):
        src = sources.get(name)
        if src and src["status"] != "observed":  # status and reason: required in every version
            return f"{name}: {reason(src['reason'])}"
        if src:  # observed, yet not for this step: GPU activity recorded in windows (capture/gpu_arming.py)
            return f"{table}: not recorded during this step ({name} was on in windows of other steps)"
    return f"{table} not observed"


def _missing(why: str) -> str:
    return f'<span class="missing">not observed: {esc(why)}</span>'


def _kv_table(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


# Evidence maps of name -> total duration in ns (the diagnosis' top_names of calls and spans),
# whose keys are names and so cannot carry the _ns suffix themselves.
DURATION_MAPS = ("calls", "wait_spans")


def _tok(key) -> str:
    """A JSON-pointer reference token (RFC 6901): names in evidence may hold '/' or '~'."""
    return str(key).replace("~", "~0").replace("/", "~1")


def _is_ns(src: str) -> bool:
    parts = src.split(":", 1)[-1].split("/")
    return any(p.endswith("_ns") for p in parts) or any(
        parts[i] == "evidence" and i + 1 < len(parts) and parts[i + 1] in DURATION_MAPS for i in range(len(parts)))


def _value(v, src: str) -> str:
    """Evidence values: numbers carry their source; others are shown as text."""
    if isinstance(v, bool) or v is None:
        return esc(plain(v))
    if isinstance(v, (int, float)):
        return num(v, "ns" if _is_ns(src) else "", src)
    if isinstance(v, list):
        return "<br>".join(_value(x, f"{src}/{i}") for i, x in enumerate(v[:LIST_SHOWN])) + (
            f"<br>… {len(v) - LIST_SHOWN} more in diagnosis.json" if len(v) > LIST_SHOWN else "")
    if isinstance(v, dict):
        return ", ".join(f"{esc(k)}: {_value(x, f'{src}/{_tok(k)}')}" for k, x in v.items())
    return esc(v)


def header(m: dict) -> str:
    snap = m["snapshot"]
    comp = m["comparison"]
    badge = (f'<span class="badge v-{esc(comp.verdict)}">{esc(comp.verdict.replace("_", " "))}</span>' if comp
             else '<span class="badge v-inconclusive">no comparison yet</span>')
    return (f'<header><h1>Incident <span id="incident-id">{esc(m["incident_id"])}</span> {badge}</h1>'
            f'<div class="muted">captured by {esc(snap.get("producer", "unknown"))} · trigger {esc(fmt_name(snap["reason"]))} · '
            f'clock {esc(snap["clock"]["host"])} · snapshot {short(m["snapshot_digest"])}</div>'
            '<nav><a href="#timeline-section">Timeline</a><a href="#diagnosis">Diagnosis</a>'
            '<a href="#plan">Plan and preflight</a><a href="#trials">Trials</a><a href="#sources">Sources</a></nav></header>')


def sources_section(m: dict) -> str:
    rows = []
    for name, s in sorted(m["snapshot"]["sources"].items()):
        status = esc(s["status"].replace("_", " "))
        rows.append(f"<tr><td>{esc(name)}</td><td>{status}</td><td>{esc(reason(s['reason']) if s['reason'] else '')}</td></tr>")
    tables = "".join(f"<tr><td>{esc(n)}</td><td class='num'>{num(e['rows'], 'count', f'snapshot:/tables/{n}/rows')}</td>"
                     f"<td>{short(e['digest'])}</td></tr>" for n, e in sorted(m["snapshot"]["tables"].items()))
    return ('<section id="sources"><h2>Sources</h2><table><tr><th>source</th><th>status</th><th>reason</th></tr>'
            + "".join(rows) + '</table><h3>Tables in the store</h3><table><tr><th>table</th><th class="num">rows</th>'
            '<th>digest</th></tr>' + tables + "</table></section>")


def timeline_section(m: dict) -> str:
    tl = m["timeline"]
    if tl is None:
        return ('<section id="timeline-section"><h2>Timeline</h2>' + _missing("the snapshot's tables were not available")
                + '<p id="render-status" class="muted"></p></section>')
    perfetto = m.get("perfetto_href")
    iid = esc(m["incident_id"])
    link = (f'Every event, unabridged: <a id="perfetto-link" href="{esc(perfetto)}">{esc(perfetto)}</a> '
            '(open it at ui.perfetto.dev or chrome://tracing).' if perfetto else
            '<span class="muted">Perfetto trace: not exported next to this report; produce it with '
            f'<code>stallcase export incidents/{iid} -o trace.perfetto.json --diagnosis results/{iid}/diagnosis.json</code> '
            'and open it at ui.perfetto.dev.</span>')
    return ('<section id="timeline-section"><h2>Timeline</h2>'
            '<div class="controls"><button id="tl-in" type="button">zoom in</button><button id="tl-out" type="button">zoom out</button>'
            '<button id="tl-reset" type="button">whole window</button><span id="tl-range" class="mono muted"></span></div>'
            '<p class="muted">Wheel to zoom, drag to pan, double-click to reset; click a step in the diagnosis to zoom to it. '
            'Tracks with many events are drawn decimated (mean coverage per pixel column, or min/max per column for samples): '
            'the drawing shows shape; every number in this page comes from the records. Findings are drawn where their '
            'evidence was (an input starvation on the wait spans it names, a sync stall on the synchronizing calls); the others, '
            "whose records say how much time they explain but not where, as a share of their step (the legend says which). "
            f'The longest GPU idle gaps are drawn where they were. Host spans are coloured by name, one row per nesting level. {link}</p>'
            '<div id="timeline-wrap"><canvas id="timeline" height="100"></canvas><div id="tl-tip"></div></div><div id="tl-legend" class="legend"></div>'
            '<p id="render-status" class="muted">drawing…</p></section>')


def _measure_cells(st: dict, i: int, sources: dict) -> str:
    cells = []
    for key, _, _ in MEASURES:
        v = st[key]
        # The reason is said once above the table (a column of repeated reasons hides the numbers).
        cells.append(f"<td class='num'>{num(v, 'ns', f'diagnosis:/steps/{i}/{key}')}</td>" if v is not None
                     else f"<td><span class='missing' title='{esc(_reason(sources, MEASURE_SOURCE[key]))}'>not observed</span></td>")
    return "".join(cells)


def _finding(f: dict, src: str) -> str:
    ev = (", ".join(f"{esc(fmt_name(k))}: {_value(v, f'{src}/evidence/{_tok(k)}')}" for k, v in f["evidence"].items()) or DASH
          if f["evidence"] is not None else f"<span class='muted'>{esc(NOT_KEPT)}</span>")
    miss = "".join(f"<li>{esc(x)}</li>" for x in f["missing"][:LIST_SHOWN])
    if len(f["missing"]) > LIST_SHOWN:
        miss += f"<li>… {len(f['missing']) - LIST_SHOWN} more in diagnosis.json</li>"
    explains = num(f["explains_ns"], "ns", f"{src}/explains_ns") if f["verdict"] == "attributed" else ""
    return (f'<div class="finding"><b>{esc(fmt_name(f["check"]))}</b> <span class="s-{esc(f["verdict"])}">{esc(f["verdict"].replace("_", " "))}</span>'
            f' {("explains " + explains) if explains else ""}<br><span class="muted">evidence:</span> {ev}'
            + (f'<br><span class="muted">missing (what would resolve it):</span><ul>{miss}</ul>' if miss else "") + "</div>")


def diagnosis_section(m: dict) -> str:
    d = m["diagnosis"]
    if d is None:
        return '<section id="diagnosis"><h2>Diagnosis</h2>' + _missing("diagnosis.json absent: run the diagnose stage") + "</section>"
    sm = d["summary"]
    # The listed steps only, read from the tables by row (a long incident's steps stay columns).
    at = dict(zip((s["index"] for s in m["slow_steps"]), m["diagnosis_tables"].steps([s["index"] for s in m["slow_steps"]])))
    parts = ['<section id="diagnosis"><h2>Diagnosis</h2>',
             _kv_table([("steps", num(sm["steps"], "count", "diagnosis:/summary/steps")),
                        ("wall time (all steps)", num(sm["wall_ns"], "ns", "diagnosis:/summary/wall_ns")),
                        *([("explained", num(sm["explained_ns"], "ns", "diagnosis:/summary/explained_ns")),
                           ("unexplained", num(sm["unexplained_ns"], "ns", "diagnosis:/summary/unexplained_ns"))]
                          if sm["explained_ns"] else
                          [("explained", "nothing: no check had the evidence to attribute time (what each lacked is below)")])])]
    head = "".join(f'<th class="num" title="{esc(doc)}">{esc(lab)}</th>' for _, lab, doc in MEASURES)
    absent: dict[str, list[str]] = {}
    for s in m["slow_steps"]:
        for key, label, _ in MEASURES:
            if at[s["index"]][key] is None and label not in absent.setdefault(_reason(d["sources"], MEASURE_SOURCE[key]), []):
                absent[_reason(d["sources"], MEASURE_SOURCE[key])].append(label)
    notes = "".join(f"<p>{esc(', '.join(labels))}: {_missing(reason)}</p>" for reason, labels in absent.items())
    parts.append(f"<h3>Slowest steps</h3><p class='muted'>The four measures side by side; a step is marked slow above "
                 f"{SLOW_FACTOR}× its rank's median step. Click a row to see it on the timeline.</p>{notes}"
                 f"<table><tr><th>step</th><th>rank</th>{head}<th class='num'>× median</th><th>findings</th></tr>")
    for s in m["slow_steps"]:
        i = s["index"]
        st = at[i]
        attributed = [f["check"] for f in st["findings"] if f["verdict"] == "attributed"]
        unresolved = [f["check"] for f in st["findings"] if f["verdict"] == "unresolved"]
        summary = (", ".join(map(fmt_name, attributed)) or "none attributed") + (f"; {len(unresolved)} unresolved" if unresolved else "")
        parts.append(f"<tr class='zoomable{' slow' if s['slow'] else ''}' data-start='{st['start_ns']}' data-end='{st['end_ns']}'>"
                     f"<td>{num(st['step_id'], 'id', f'diagnosis:/steps/{i}/step_id')}</td><td>{esc(plain(st['rank']))}</td>"
                     f"{_measure_cells(st, i, d['sources'])}<td class='num'>{s['ratio_to_median']:.2f}</td><td>{esc(summary)}</td></tr>")
    parts.append("</table>")
    # An unresolved finding lacking the same evidence in every listed step is said once, not per step.
    listed = [at[s["index"]] for s in m["slow_steps"]]
    common = set.intersection(*({(f["check"], tuple(f["missing"])) for f in st["findings"] if f["verdict"] == "unresolved"}
                                for st in listed)) if listed else set()
    if common:
        parts.append("<div class='finding'><b>Unresolved in every step listed</b>, for want of:<ul>" + "".join(
            f"<li>{esc(fmt_name(c))}: {esc('; '.join(miss))}</li>" for c, miss in sorted(common)) + "</ul></div>")
    for s in m["slow_steps"]:
        i = s["index"]
        st = at[i]
        body = "".join(_finding(f, f"diagnosis:/steps/{i}/findings/{j}") for j, f in enumerate(st["findings"])
                       if (f["check"], tuple(f["missing"])) not in common or f["verdict"] != "unresolved") or \
            "<p class='muted'>only the unresolved checks said above</p>"
        parts.append(f"<details{' open' if s is m['slow_steps'][0] else ''}><summary>step {esc(st['step_id'])}"
                     f"{'' if st['rank'] is None else ' rank ' + esc(st['rank'])}: "
                     f"{num(st['explained_ns'], 'ns', f'diagnosis:/steps/{i}/explained_ns')} explained, "
                     f"{num(st['unexplained_ns'], 'ns', f'diagnosis:/steps/{i}/unexplained_ns')} unexplained</summary>{body}</details>")
    rows = "".join(f"<tr><td>{esc(c)}</td><td class='num'>{num(b['attributed_steps'], 'count', f'diagnosis:/summary/by_check/{c}/attributed_steps')}</td>"
                   f"<td class='num'>{num(b['unresolved_steps'], 'count', f'diagnosis:/summary/by_check/{c}/unresolved_steps')}</td>"
                   f"<td class='num'>{num(b['not_applicable_steps'], 'count', f'diagnosis:/summary/by_check/{c}/not_applicable_steps')}</td>"
                   f"<td class='num'>{num(b['explains_ns'], 'ns', f'diagnosis:/summary/by_check/{c}/explains_ns')}</td></tr>"
                   for c, b in sm["by_check"].items())
    parts.append("<h3>All steps, by check</h3><table><tr><th>check</th><th class='num'>attributed</th><th class='num'>unresolved</th>"
                 f"<th class='num'>not applicable</th><th class='num'>explains</th></tr>{rows}</table>")
    parts.append("<h3 id='next-experiments'>Next experiments</h3>")
    if d["next_experiments"]:
        parts.append("<table><tr><th>#</th><th>check</th><th>candidate change</th><th class='num'>recovers at most</th>"
                     "<th class='num'>steps</th><th>risk</th></tr>")
        for k, e in enumerate(d["next_experiments"]):
            parts.append(f"<tr><td>{esc(e['rank'])}</td><td>{esc(e['check'])}</td><td>{esc(e['candidate_change'])}</td>"
                         f"<td class='num'>{num(e['recoverable_upper_bound_ns'], 'ns', f'diagnosis:/next_experiments/{k}/recoverable_upper_bound_ns')}</td>"
                         f"<td class='num'>{num(e['steps'], 'count', f'diagnosis:/next_experiments/{k}/steps')}</td>"
                         f"<td>{esc(e['risk'])}: {esc(e['risk_note'])}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p class='muted'>None: no finding was attributed, so no change can be ranked by the time it would "
                     "recover. The unresolved findings above name the evidence to capture next.</p>")
    parts.append("</section>")
    return "".join(parts)


def _env_table(env: dict) -> str:
    seen, not_obs = environment_rows(env)
    rows = "".join(f"<tr><td>{esc(k)}</td><td class='mono'>{esc(json.dumps(v) if not isinstance(v, str) else v)}</td></tr>" for k, v in seen)
    rows += "".join(f"<tr><td>{esc(k)}</td><td>{_missing(r)}</td></tr>" for k, r in not_obs)
    return f"<table><tr><th>field</th><th>value</th></tr>{rows}</table>"


def _design(d: Design) -> str:
    keys = ("blocks", "runs_per_arm", "control_runs", "warmup_runs", "max_retries", "seed", "confidence", "max_failed_fraction")
    unit = {"seed": "id", "confidence": "share", "max_failed_fraction": "share"}
    shown = ", ".join(f"{esc(fmt_name(k))} {num(getattr(d, k), unit.get(k, 'count'), f'plan:/design/{k}')}" for k in keys)
    metric = d.metric.to_json()  # every field the plan wrote, as written
    said = ", ".join(f"{fmt_name(k)} {v}" for k, v in sorted(metric.items()))
    return f"{shown}; metric: {esc(said)}"


def plan_section(m: dict) -> str:
    p = m["plan"]
    if p is None:
        return '<section id="plan"><h2>Plan and preflight</h2>' + _missing("plan.json absent: run the plan stage") + "</section>"
    exp = p.experiment
    out = ['<section id="plan"><h2>Plan and preflight</h2>',
           _kv_table([("experiment", esc(exp) if exp else "none: trials must run in the incident's own environment"),
                      ("plan digest", short(m["plan_digest"])), ("snapshot digest", short(p.snapshot_digest)),
                      ("workload", f"<code>{esc(' '.join(p.workload.argv))}</code>"),
                      ("working directory", f"<code>{esc(p.workload.cwd)}</code>"),
                      ("baseline changes", esc(changes(p.arms.baseline.changes))),
                      ("candidate changes", esc(changes(p.arms.candidate.changes))),
                      ("design", _design(p.design))])]
    arts = "".join(f"<tr><td>{esc(a.role)}</td><td class='mono'>{esc(a.path)}</td><td>{short(a.digest)}</td>"
                   f"<td class='num'>{num(a.size, 'count', f'plan:/artifacts/{i}/size')}</td></tr>" for i, a in enumerate(p.artifacts))
    out.append(f"<details><summary>{len(p.artifacts)} artifacts pinned by digest</summary><table><tr><th>role</th><th>path</th>"
               f"<th>digest</th><th class='num'>bytes</th></tr>{arts}</table></details>")
    out.append(f"<details><summary>environment at capture</summary>{_env_table(p.environment)}</details>")
    out.append("<h3>Preflight per block</h3>")
    if not m["preflights"]:
        out.append(_missing("no preflight record next to plan.json"))
    else:
        out.append("<table><tr><th>block</th><th>node</th><th>status</th><th>digest</th><th>differences</th><th>missing artifacts</th></tr>")
        for b, pf in m["preflights"].items():
            diffs = "".join(f"<li><code>{esc(d['field'])}</code>: planned <code>{esc(json.dumps(d['planned']))}</code>, "
                            f"observed <code>{esc(json.dumps(d['observed']))}</code></li>" for d in pf["differences"])
            miss = "".join(f"<li>{esc(x['role'])} <code>{esc(x['path'])}</code> {esc(x.get('problem', ''))}</li>" for x in pf["missing"])
            out.append(f"<tr><td>{esc(b)}</td><td>{esc(pf['node'])}</td><td class='st-{esc(pf['status'])}'>{esc(pf['status'])}</td>"
                       f"<td>{short(m['preflight_digests'][b])}</td><td>{'<ul>' + diffs + '</ul>' if diffs else 'none'}</td>"
                       f"<td>{'<ul>' + miss + '</ul>' if miss else 'none'}</td></tr>")
        out.append("</table>")
    out.append("</section>")
    return "".join(out)


def trials_section(m: dict) -> str:
    c = m["comparison"]
    out = ['<section id="trials"><h2>Trials</h2>']
    if not m["trials"]:
        out.append(_missing("no execution records next to plan.json"))
    else:
        out.append("<h3>Runs in run order</h3>" + plots.runs_plot(m["trials"], c)
                   + "<h3>Drift: each run against its arm's median</h3>" + plots.runs_plot(m["trials"], c, relative=True))
    if c is None:
        out.append(_missing("comparison.json absent: run the compare stage") + "</section>")
        return "".join(out)
    out.append(f'<h3>Comparison</h3><p class="words" id="verdict-words">{esc(m["verdict_words"])}</p>')
    out.append(plots.comparison_plot(c))
    est, fl, mde = c.estimate, c.noise_floor, c.mde
    out.append(_kv_table([
        ("verdict", f'<span class="badge v-{esc(c.verdict)}">{esc(c.verdict.replace("_", " "))}</span>'),
        ("change (B vs A)", num(est.change_pct, "pct", "comparison:/estimate/change_pct")),
        ("ratio B / A", num(est.ratio, "ratio", "comparison:/estimate/ratio") + " ["
         + num(est.ratio_low, "ratio", "comparison:/estimate/ratio_low") + ", "
         + num(est.ratio_high, "ratio", "comparison:/estimate/ratio_high") + "]"),
        ("noise floor (A′ vs A)", "±" + num(fl.pct, "pct_abs", "comparison:/noise_floor/pct")),
        ("minimal detectable effect", num(mde.pct, "pct_abs", "comparison:/mde/pct")),
        ("blocks used", num(c.counts.valid_blocks, "count", "comparison:/counts/valid_blocks") + " of "
         + num(c.counts.planned_blocks, "count", "comparison:/counts/planned_blocks")),
    ]))
    out.append("<h3>Why</h3><ol>" + "".join(f"<li>{esc(r)}</li>" for r in c.reasons) + "</ol>")
    out.append(why_changed.section(c))
    rows = "".join(
        f"<tr><td>{esc(b.block)}</td><td>{'yes' if b.used else esc(b.exclusion or 'no')}</td>"
        + "".join(f"<td class='num'>{num(b.median_ns[a], 'ns', f'comparison:/blocks/{i}/median_ns/{a}')}</td>" for a in ("A", "B", "A'"))
        + f"<td class='num'>{num(b.log_ratio, 'log_pct', f'comparison:/blocks/{i}/log_ratio')}</td>"
        f"<td class='num'>{num(b.control_log_ratio, 'log_pct', f'comparison:/blocks/{i}/control_log_ratio')}</td>"
        f"<td class='num'>{num(b.failed_runs, 'count', f'comparison:/blocks/{i}/failed_runs')}</td></tr>"
        for i, b in enumerate(c.blocks))
    out.append("<h3>Per block</h3><table><tr><th>block</th><th>used</th><th class='num'>median A</th><th class='num'>median B</th>"
               "<th class='num'>median A′</th><th class='num'>B vs A</th><th class='num'>A′ vs A</th><th class='num'>failed runs</th></tr>"
               f"{rows}</table></section>")
    return "".join(out)


def page(m: dict) -> str:
    data = {"incident_id": m["incident_id"], "snapshot_digest": m["snapshot_digest"], "timeline": m["timeline"],
            "colors": {"findings": palette.FINDING_COLORS, "finding_other": palette.FINDING_OTHER,
                       "span_other": palette.SPAN_OTHER}}
    body = "".join([header(m), "<main>", html_glance.section(m["glance"]), timeline_section(m), diagnosis_section(m), plan_section(m), trials_section(m),
                    sources_section(m), "</main>"])
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>stallcase: {esc(m['incident_id'])}</title><style>{CSS}</style></head><body>{body}"
            f'<script type="application/json" id="stallcase-data">{_json_script(data)}</script>'
            f"<script>{JS}</script></body></html>\n")
