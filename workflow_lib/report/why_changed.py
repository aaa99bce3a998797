"""The "why it changed" part of the trials section, from comparison.components.

A table of the components (each change with its interval and its own A/A floor), the baseline
diagnoses' predictions beside the outcome, and a typical step of A next to a typical step of
B on the same scale, split into the overlap-free parts that add up to the step. (A schema 1
comparison is read with no components and a sentence that says why: core/records.py.)
"""

from __future__ import annotations

from ..compare.types import Comparison, Component, Prediction
from .fmt import esc, num

# The same colours as the timeline's findings (assets.CHECK_COLORS); spans and the rest cycle.
COLORS = {"check:gpu_bound": "#0f766e", "check:host_submission": "#a16207", "check:sync_stall": "#dc2626",
          "check:input_starvation": "#ea580c", "check:clock_throttle": "#9333ea", "check:launch_bound": "#0891b2",
          "check:collective_wait": "#2563eb", "unexplained": "#94a3b8", "span:(none)": "#cbd5e1"}
CYCLE = ("#4f46e5", "#059669", "#d97706", "#be185d", "#0284c7", "#65a30d", "#7c3aed", "#b91c1c")


def _src(i: int, field: str) -> str:
    return f"comparison:/components/{i}/{field}"


def _row(i: int, r: Component) -> str:
    lo_hi = (num(r.interval_ns[0], "ns", _src(i, "interval_ns/0")) + ", "
             + num(r.interval_ns[1], "ns", _src(i, "interval_ns/1")))
    state = ("clears its floor" if r.clears_floor else "within its floor") if r.status == "resolved" \
        else f'<span class="missing">unresolved: {esc(r.reason or "")}</span>'
    return (f"<tr><td>{esc(r.label)}</td><td>{esc(r.group)}</td>"
            f"<td class='num'>{num(r.baseline_ns_per_step, 'ns', _src(i, 'baseline_ns_per_step'))}</td>"
            f"<td class='num'>{num(r.delta_ns_per_step, 'ns', _src(i, 'delta_ns_per_step'))}</td>"
            f"<td class='num'>[{lo_hi}]</td>"
            f"<td class='num'>±{num(r.floor_ns, 'ns', _src(i, 'floor_ns'))}</td>"
            f"<td class='num'>{num(r.share_of_change, '', _src(i, 'share_of_change'))}</td><td>{state}</td></tr>")


def _predictions(preds: list[Prediction]) -> str:
    if not preds:
        return ""
    rows = "".join(
        f"<tr><td>{esc(p.check)}</td>"
        f"<td class='num'>{num(p.bound_ns_per_step, 'ns', f'comparison:/predictions/{i}/bound_ns_per_step')}</td>"
        f"<td class='num'>{num(p.recovered_ns_per_step, 'ns', f'comparison:/predictions/{i}/recovered_ns_per_step')}</td>"
        f"<td>{esc(p.outcome.replace('_', ' '))}</td><td>{esc(p.note)}</td></tr>"
        for i, p in enumerate(preds))
    return ("<h4>Prediction against outcome</h4><table><tr><th>cause</th><th class='num'>bound per step</th>"
            f"<th class='num'>recovered per step</th><th>outcome</th><th>note</th></tr>{rows}</table>")


def _partition(rows: list[Component]) -> list[Component]:
    """The overlap-free parts to draw: the checks with the unexplained rest when all resolved,
    else the top-level spans (what a CPU run observes)."""
    for group in ("attribution", "span"):
        parts = [r for r in rows if r.group == group]
        if parts and all(r.status == "resolved" for r in parts):
            return parts
    return []


def typical_steps(rows: list[Component]) -> str:
    """Two stacked bars, A and B, on one scale; B's parts are A's plus each part's estimate."""
    # A's level per part comes with each component (compare's field); without it no bar is drawn.
    parts = [r for r in _partition(rows) if r.baseline_ns_per_step is not None]
    if not parts:
        return ""
    a = [max(0.0, r.baseline_ns_per_step) for r in parts]
    b = [max(0.0, r.baseline_ns_per_step + r.delta_ns_per_step) for r in parts]
    scale = max(sum(a), sum(b)) or 1.0
    colors = {r.name: COLORS.get(r.name, CYCLE[k % len(CYCLE)]) for k, r in enumerate(parts)}

    def bar(arm: str, values: list[float]) -> str:
        segs = "".join(
            f'<i title="{esc(r.label)}" style="display:inline-block;height:18px;width:{100.0 * v / scale:.3f}%;'
            f'background:{colors[r.name]}"></i>' for r, v in zip(parts, values) if v > 0)
        return f'<div class="typical-step"><b style="display:inline-block;width:6em">{arm}</b><span style="display:inline-block;width:calc(100% - 7em);white-space:nowrap">{segs}</span></div>'

    legend = "".join(f'<span><i style="background:{colors[r.name]}"></i>{esc(r.label)}</span>' for r in parts)
    return ("<h4>A typical step of A and of B, same scale</h4>"
            "<p class='words'>Each bar is a step's mean time split into parts that never overlap; B's parts are "
            "A's plus each part's estimated change.</p>"
            + bar("baseline", a) + bar("candidate", b) + f'<div class="legend">{legend}</div>')


def section(c: Comparison) -> str:
    """The section's HTML for one comparison record."""
    rows = c.components
    out = [f"<h3>Why it changed</h3><p class='words' id='why-sentence'>{esc(c.sentence)}</p>"]
    if not rows:
        out.append("<p class='missing'>no per-run components: the trial runs were not recorded "
                   "(trials.record_runs) or none was diagnosed</p>")
        return "".join(out)
    body = "".join(_row(i, r) for i, r in enumerate(rows))
    out.append("<table><tr><th>component</th><th>kind</th><th class='num'>baseline per step</th>"
               "<th class='num'>change per step (B − A)</th><th class='num'>interval</th><th class='num'>own A/A floor</th>"
               f"<th class='num'>share of change</th><th>status</th></tr>{body}</table>")
    out.append(_predictions(c.predictions))
    out.append(typical_steps(rows))
    return "".join(out)
