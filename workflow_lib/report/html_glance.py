"""The first screen as HTML: verdict, why the slow steps were slow, what changed, what next.

Laid out to fit 1400x900 with the header (tests/test_report_browser.py measures it).
"""

from __future__ import annotations

from .fmt import esc, num, reason
from .glance import FIRST_CALLS_WHY, Num
from .palette import UNEXPLAINED, finding_color


def n(x: Num | None) -> str:
    return "—" if x is None else num(x.value, x.unit, x.src)


def _verdict(v: dict | None) -> str:
    if v is None:
        return ('<div class="card verdict v-inconclusive" id="glance-verdict"><div class="vword">No comparison yet</div>'
                '<div class="vnums">comparison.json absent: the trials have not run (<code>snakemake --config incident=…</code>)</div></div>')
    nums = []
    if v["change"] is not None:
        iv = (f' <span class="iv">[{n(v["low"])}, {n(v["high"])}]</span> at {v["confidence"]:.0%} confidence'
              if v["low"] is not None and v["high"] is not None else " (no interval: too few blocks)")
        nums.append(f'{esc(v["metric"])} <b class="big">{n(v["change"])}</b>{iv}')
    nums.append(f'noise floor ±{n(v["floor"])} <span class="muted">(A′ vs A)</span>' if v["floor"] is not None
                else "noise floor not measured")
    nums.append(f'{n(v["valid"])} of {n(v["planned"])} blocks used')
    sentence = v["sentence"] or (reason(v["reason"]) if v["reason"] else v["headline"])
    aa = ('<div class="muted">A deliberate A/A experiment: the candidate is the baseline, so any verdict other than '
          'no change measures this setup\'s noise.</div>' if v["aa"] else "")
    return (f'<div class="card verdict v-{esc(v["verdict"])}" id="glance-verdict"><div class="vword">{esc(v["word"])}</div>'
            f'<div class="vnums">{" · ".join(nums)}</div><div class="vsentence">{esc(sentence)}</div>{aa}</div>')


def _bar(causes: list[tuple[str, Num]], unexplained: Num | None, total: float) -> str:
    if total <= 0:
        return ""
    segs = [(c, x.value) for c, x in causes] + ([("unexplained", unexplained.value)] if unexplained and unexplained.value else [])
    out = []
    for c, v in segs:
        color = UNEXPLAINED if c == "unexplained" else finding_color(c.replace(" ", "_"))
        out.append(f'<i style="width:{max(min(v / total, 1.0), 0) * 100:.2f}%;background:{color}" title="{esc(c)}"></i>')
    return f'<div class="xbar">{"".join(out)}</div>'


def _cause_list(causes: list[tuple[str, Num]], unexplained: Num | None) -> str:
    items = [f'<span class="cause"><i style="background:{finding_color(c.replace(" ", "_"))}"></i>{esc(c)} {n(x)}</span>'
             for c, x in causes]
    if unexplained is not None and unexplained.value:
        items.append(f'<span class="cause"><i style="background:{UNEXPLAINED}"></i>unexplained {n(unexplained)}</span>')
    return " ".join(items)


def _missing(missing: list[str]) -> str:
    return ("No cause attributed: the checks lacked " + "; ".join(f"<b>{esc(m)}</b>" for m in missing) + "."
            if missing else "No cause attributed.")


def _step_name(r: dict) -> str:
    rank = "" if r["rank"] is None else f" rank {n(r['rank'])}"
    return f"step {n(r['step_id'])}{rank}"


def _excess(x: dict) -> str:
    head = '<div class="card" id="glance-excess"><h3>Why the slow steps were slow</h3>'
    if x["kind"] == "absent":
        return head + f'<p class="missing">{esc(x["reason"])}</p></div>'
    if x["kind"] == "no_steps":
        return head + '<p class="missing">no steps in the diagnosis: nothing to compare a slow step with</p></div>'
    if x["kind"] == "excess":
        if not x["rows"]:
            return head + (f'<p>No step took 1.5× its typical time or more (of {n(x["steps"])} steps).</p></div>')
        parts = [head, f'<p class="muted">{x["count"]} of {n(x["steps"])} steps took at least 1.5× their typical time; '
                       'the largest excess first.</p>']
        for r in x["rows"]:
            parts.append(f'<div class="xrow"><div>{_step_name(r)}: {n(r["wall"])} against a typical {n(r["typical"])}: '
                         f'<b>{n(r["excess"])} excess</b></div>{_bar(r["causes"], r["unexplained"], r["excess_ns"])}'
                         f'<div class="causes">{_cause_list(r["causes"], r["unexplained"]) or _missing(x["missing"])}</div>'
                         + (f'<div class="muted small">grew most: {", ".join(f"{esc(g)} {n(v)}" for g, v in r["grew"])}</div>'
                            if r["grew"] else "") + '</div>')
        return "".join(parts) + "</div>"
    # kind == "slowest": a diagnosis without the per-step excess
    ratio = f'{x["ratio"]:.2f}× its rank\'s median step' if x["ratio"] else "its rank's only step"
    flag = "" if x["slow"] else " (no step is over 1.25× the median: the loop is even)"
    body = (f'<div class="xrow"><div>Slowest: {_step_name(x)} took <b>{n(x["wall"])}</b>, {ratio}{flag}.</div>')
    if x["causes"]:
        total = sum(c.value for _, c in x["causes"]) + (x["unexplained"].value if x["unexplained"] else 0)
        body += (f'{_bar(x["causes"], x["unexplained"], total)}<div class="causes">{_cause_list(x["causes"], x["unexplained"])}'
                 '</div>')
    else:
        body += f'<div class="causes">{_missing(x["missing"])}</div>'
    return (head + body + '</div><p class="muted small">This diagnosis predates the per-step excess over a typical '
            'step; shown instead: the slowest step and what it attributed.</p></div>')


def _components(cs: list[dict] | None, v: dict | None) -> str:
    head = '<div class="card" id="glance-components"><h3>What changed between A and B</h3>'
    if v is None:
        return head + '<p class="missing">no comparison yet</p></div>'
    if cs is None:
        return head + (f'<p>The verdict covers the whole {esc(v["metric"])}; this comparison record has no per-component '
                       'breakdown of the change (components appear once the comparison splits it by cause).</p></div>')
    rows = []
    for c in cs:
        iv = f'[{n(c["low"])}, {n(c["high"])}]' if c["low"] is not None and c["high"] is not None else ""
        status = "clears its floor" if c["clears"] else "within its floor"
        rows.append(f'<tr class="c-{esc(c["status"])}"><td>{esc(c["name"])}</td><td class="num">{n(c["delta"])}/step</td>'
                    f'<td class="num">{iv}</td><td class="num">±{n(c["floor"])}</td><td class="num">{n(c["share"])}</td>'
                    f'<td>{esc(status)}{"" if c["status"] == "resolved" else ", unresolved"}</td></tr>')
    return (head + '<table class="compact"><tr><th>component</th><th class="num">change</th><th class="num">interval</th>'
            '<th class="num">floor</th><th class="num">share</th><th></th></tr>' + "".join(rows) + "</table></div>")


def _next(x: dict) -> str:
    head = '<div class="card" id="glance-next"><h3>Next experiment</h3>'
    tried = f'<p class="muted small">These trials tested the candidate: {esc(x["tried"])}.</p>' if x.get("tried") else ""
    if x["kind"] == "absent":
        return head + '<p class="missing">diagnosis.json absent: no experiment ranked</p>' + tried + "</div>"
    if x["kind"] == "none":
        what = ("capture " + "; ".join(f"<b>{esc(m)}</b>" for m in x["missing"]) + " and diagnose again") if x["missing"] \
            else "capture more of the incident and diagnose again"
        return head + f'<p>None ranked: no finding was attributed. First {what}.</p>' + tried + "</div>"
    more = f' <a href="#next-experiments">{x["more"]} more ranked below</a>.' if x["more"] else ""
    return (head + f'<p><b>{esc(x["change"])}</b> <span class="muted">({esc(x["check"])})</span>: recovers at most '
            f'{n(x["recovers"])} over {n(x["steps"])} steps; risk {esc(x["risk"])}.{more}</p>' + tried + "</div>")


def _warm_up(w: dict | None) -> str:
    if w is None:
        return ""
    ids = ", ".join(str(i) for i in w["step_ids"])
    return (f'<p id="glance-warmup"><b>Warm-up: {n(w["wall"])}, once per process</b> <span class="muted">'
            f'({n(w["steps"])} cold first step(s): {esc(ids)}; {n(w["over"])} over the typical step). Context creation, '
            f'lazy init, handles, compilation and worker start are paid once: not a per-step fix, not ranked.</span></p>')


def _first_calls(f: dict | None) -> str:
    if f is None:
        return ""
    return (f'<p id="glance-first-calls"><b>One-time first calls: {n(f["explains"])} in {n(f["steps"])} step(s)</b> '
            f'<span class="muted">({esc(FIRST_CALLS_WHY)}).</span></p>')


def section(g: dict) -> str:
    return (f'<section id="glance">{_verdict(g["verdict"])}<div class="cards">{_excess(g["excess"])}'
            f'{_components(g["components"], g["verdict"])}</div>{_next(g["next"])}{_warm_up(g.get("warm_up"))}'
            f'{_first_calls(g["first_calls"])}</section>')
