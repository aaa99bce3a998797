"""Static SVG plots of the trials (no script needed): runs in run order, and the comparison.

Every mark carries its record source (data-src, data-v) like the numbers in the tables.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ..compare.types import Comparison
from .fmt import esc, nice_step, nice_ticks, ns, ns_tick_unit, pct_abs, tick_label

ARM_COLORS = {"A": "#2563eb", "B": "#ea580c", "A'": "#16a34a", "warmup": "#98a2b3"}
ARM_NAMES = {"A": "A baseline", "B": "B candidate", "A'": "A′ baseline control", "warmup": "warmup"}


def _attrs(src: str, value) -> str:
    return f'data-src="{esc(src)}" data-v="{esc(json.dumps(value))}"'


def _arm_medians(trials: list[dict]) -> dict[str, float]:
    by_arm: dict[str, list[float]] = {}
    for b in trials:
        for r in b["runs"]:
            if r["metric_ns"]:
                by_arm.setdefault(r["arm"], []).append(r["metric_ns"])
    return {a: float(np.median(v)) for a, v in by_arm.items()}


def _decade_ticks(lo: float, hi: float) -> list[float]:
    """1, 2 and 5 x 10^k within [lo, hi] (lo > 0): the round values of a log axis."""
    out = []
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        out += [m * 10.0 ** k for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    return out


def _ns_tick(v: float, step: float) -> str:
    div, unit = ns_tick_unit(step)
    return tick_label(v / div, step / div, unit)


def _y_ticks(lo: float, hi: float, log: bool, relative: bool) -> list[tuple[float, str]]:
    if relative:  # fractions, printed as percent
        step = nice_step((hi - lo) * 100, 4)
        return [(v / 100, tick_label(v, step, "%")) for v in nice_ticks(lo * 100, hi * 100, 4)]
    if log:  # decades when the axis spans enough of them; else round linear values (placed on the log axis)
        ticks = _decade_ticks(lo, hi)
        if len(ticks) >= 3:
            return [(v, _ns_tick(v, v)) for v in ticks]
    step = nice_step(hi - lo, 4)
    return [(v, _ns_tick(v, step)) for v in nice_ticks(lo, hi, 4)]


def _pct_axis_ticks(ext: float) -> list[tuple[float, str]]:
    """(log ratio, label) ticks of the comparison axis [-ext, ext]: round percentages when the
    axis is narrow (log and % change are near-proportional there), round ratios when it is wide."""
    lo_p, hi_p = (math.exp(-ext) - 1) * 100, (math.exp(ext) - 1) * 100
    def linear():
        step = nice_step(hi_p - lo_p, 8)
        return [(math.log1p(p / 100), tick_label(p, step, "%")) for p in nice_ticks(lo_p, hi_p, 8) if p > -100]

    if ext < 0.7:
        return linear()
    # wide: round ratios and their reciprocals (x2, x4, x5, x10 ... faster or slower)
    ratios = {1.0}
    for k in range(0, 7):
        for m in ((2, 4, 5) if k == 0 else (1, 2, 5)):
            ratios |= {m * 10.0 ** k, 1 / (m * 10.0 ** k)}
    ratios = sorted(r for r in ratios if math.exp(-ext) <= r <= math.exp(ext))
    if len(ratios) > 7:  # many decades: only x10 steps (and x2 either side of no change)
        ratios = [r for r in ratios if r in (0.5, 1.0, 2.0) or abs(math.log10(r) - round(math.log10(r))) < 1e-9]
    if len(ratios) < 3:
        return linear()
    return [(math.log(r), tick_label((r - 1) * 100, 1, "%")) for r in ratios]


def runs_plot(trials: list[dict], comparison: dict | None, *, width: int = 960, height: int = 280,
              relative: bool = False) -> str:
    """Every run of every block in run order; per block a tick at each arm's median (from the comparison).

    relative=True plots each run as its deviation from its arm's median over all blocks: when
    B is far from A, a shared axis hides drift within an arm; this view shows it.
    """
    values = [r["metric_ns"] for b in trials for r in b["runs"] if r["metric_ns"]]
    if not values:
        return '<p class="missing">not observed: no run produced a value</p>'
    left, right, top, bottom = 70, 10, 14, 34
    med = _arm_medians(trials)
    if relative:
        rel = [r["metric_ns"] / med[r["arm"]] - 1.0 for b in trials for r in b["runs"] if r["metric_ns"]]
        lo, hi = min(rel + [0.0]), max(rel + [0.0])
        pad = (hi - lo) * 0.1 or 0.01
        lo, hi, log = lo - pad, hi + pad, False
        f = lambda v: v  # noqa: E731
    else:
        lo, hi = min(values), max(values)
        log = hi / lo > 3  # runs spread over a decade or more are readable only on a log axis
        if log:
            lo, hi = lo / 1.15, hi * 1.15  # room above and below the extreme runs
            f = lambda v: math.log(v)  # noqa: E731
        else:
            f = lambda v: v  # noqa: E731
            pad = (hi - lo) * 0.1 or hi * 0.05 or 1.0
            lo, hi = max(lo - pad, 0.0), hi + pad
    flo, fhi = f(lo), f(hi)
    span = (fhi - flo) or 1.0
    ph = height - top - bottom

    def yf(v):  # v already in axis units
        return top + ph - (f(v) - flo) / span * ph

    def yv(v, arm=None):  # a metric value in ns
        return yf(v / med[arm] - 1.0) if relative else yf(v)

    n_slots = sum(max(len(b["runs"]), 1) for b in trials) + len(trials)
    dx = (width - left - right) / max(n_slots, 1)
    out = [f'<svg class="plot" id="runs-plot{"-relative" if relative else ""}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="sans-serif">']
    for v, text in _y_ticks(lo, hi, log, relative):  # at round values: 1, 2 or 5 x 10^k
        y = yf(v)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eef2f6"/>'
                   f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" fill="#667085">{esc(text)}</text>')
    blocks = comparison.blocks if comparison is not None else []
    block_medians = {b.block: b.median_ns for b in blocks}
    bidx = {b.block: i for i, b in enumerate(blocks)}
    slot = 0
    for b in trials:
        x0 = left + slot * dx
        n = max(len(b["runs"]), 1)
        out.append(f'<text x="{x0 + n * dx / 2:.1f}" y="{height - 18}" text-anchor="middle" fill="#334155">{esc(b["block"])}</text>')
        if b["status"] != "complete":
            out.append(f'<text x="{x0 + n * dx / 2:.1f}" y="{height - 5}" text-anchor="middle" fill="#991b1b">{esc(b["status"])}</text>')
        for r in b["runs"]:
            x = left + (slot + 0.5) * dx
            color = ARM_COLORS.get(r["arm"], "#333")
            if r["metric_ns"]:
                title = f'{b["block"]} run {r["index"]} ({ARM_NAMES.get(r["arm"], r["arm"])}), attempt {r["attempt"]}: {ns(r["metric_ns"])}'
                fill = "none" if r["arm"] == "warmup" else color
                out.append(f'<circle class="run" cx="{x:.1f}" cy="{yv(r["metric_ns"], r["arm"]):.1f}" r="4" fill="{fill}" stroke="{color}" '
                           f'{_attrs(r["src"], r["metric_ns"])}><title>{esc(title)}</title></circle>')
            else:
                y = top + ph
                out.append(f'<path d="M{x - 4:.1f},{y - 4:.1f}l8,8m0,-8l-8,8" stroke="#dc2626" stroke-width="2">'
                           f'<title>{esc(b["block"])} run {r["index"]} ({esc(r["arm"])}) attempt {r["attempt"]}: failed</title></path>')
            slot += 1
        if not b["runs"]:
            slot += 1
        for arm, v in block_medians.get(b["block"], {}).items():
            if v and arm in med:
                y = yv(v, arm)
                src = f'comparison:/blocks/{bidx[b["block"]]}/median_ns/{arm.replace("~", "~0").replace("/", "~1")}'
                out.append(f'<line class="median" x1="{x0:.1f}" x2="{x0 + n * dx:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                           f'stroke="{ARM_COLORS[arm]}" stroke-width="1.5" stroke-dasharray="4 3" {_attrs(src, v)}>'
                           f'<title>{esc(b["block"])} median {esc(arm)}: {esc(ns(v))}</title></line>')
        slot += 1
        out.append(f'<line x1="{left + (slot - 0.5) * dx:.1f}" x2="{left + (slot - 0.5) * dx:.1f}" y1="{top}" y2="{top + ph}" stroke="#e2e8f0"/>')
    out.append("</svg>")
    legend = " ".join(f'<span><i style="background:{c}"></i>{esc(ARM_NAMES[a])}</span>' for a, c in ARM_COLORS.items())
    axis = "deviation from the arm's median over all blocks" if relative else ("log scale" if log else "linear scale")
    return "".join(out) + f'<div class="legend">{legend}<span class="muted">dashed: the block\'s median per arm; × failed attempt; y: {axis}</span></div>'


def comparison_plot(comparison: Comparison, *, width: int = 960, height: int = 150) -> str:
    """B/A and A'/A intervals (log-ratio axis, labelled as % change) against the noise-floor band."""
    est, ctrl = comparison.estimate, comparison.noise_floor.control
    floor = comparison.noise_floor.log
    vals = [v for v in (est.log_low, est.log_high, est.log_ratio, ctrl.log_low, ctrl.log_high, floor) if v is not None]
    vals += [v for b in comparison.blocks for v in (b.log_ratio, b.control_log_ratio) if v is not None]
    ext = max([abs(v) for v in vals] + [0.02]) * 1.15
    left, right = 130, 20
    pw = width - left - right

    def xv(v):
        return left + (v + ext) / (2 * ext) * pw

    out = [f'<svg class="plot" id="comparison-plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="sans-serif">']
    if floor is not None:
        out.append(f'<rect x="{xv(-floor):.1f}" y="10" width="{xv(floor) - xv(-floor):.1f}" height="{height - 40}" fill="#e2e8f0" '
                   f'{_attrs("comparison:/noise_floor/log", floor)}><title>A/A noise floor ±{pct_abs(comparison.noise_floor.pct)}</title></rect>')
    for v, text in _pct_axis_ticks(ext):
        out.append(f'<line x1="{xv(v):.1f}" x2="{xv(v):.1f}" y1="{height - 30}" y2="{height - 25}" stroke="#667085"/>'
                   f'<text x="{xv(v):.1f}" y="{height - 12}" text-anchor="middle" fill="#667085">{esc(text)}</text>')
    out.append(f'<line x1="{xv(0):.1f}" x2="{xv(0):.1f}" y1="6" y2="{height - 28}" stroke="#334155"/>')
    rows = (("B / A", est, "/estimate", "log_ratio", ARM_COLORS["B"], 40),
            ("A′ / A (noise)", ctrl, "/noise_floor/control", "control_log_ratio", ARM_COLORS["A'"], 82))
    for label, iv, ptr, block_key, color, y in rows:
        out.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" fill="#1d2330">{esc(label)}</text>')
        for i, b in enumerate(comparison.blocks):
            value = getattr(b, block_key)
            if value is not None:
                out.append(f'<circle class="block-ratio" cx="{xv(value):.1f}" cy="{y + 14}" r="2.5" fill="{color}" opacity="0.6" '
                           f'{_attrs(f"comparison:/blocks/{i}/{block_key}", value)}><title>{esc(b.block)}</title></circle>')
        if iv.log_low is not None and iv.log_high is not None:
            out.append(f'<line class="interval" x1="{xv(iv.log_low):.1f}" x2="{xv(iv.log_high):.1f}" y1="{y}" y2="{y}" stroke="{color}" '
                       f'stroke-width="4" {_attrs(f"comparison:{ptr}/log_low", iv.log_low)}/>')
        if iv.log_ratio is not None:
            out.append(f'<circle class="estimate" cx="{xv(iv.log_ratio):.1f}" cy="{y}" r="6" fill="#fff" stroke="{color}" stroke-width="3" '
                       f'{_attrs(f"comparison:{ptr}/log_ratio", iv.log_ratio)}/>')
    out.append("</svg>")
    return "".join(out) + ('<div class="legend"><span><i style="background:#e2e8f0"></i>A/A noise-floor band</span>'
                           '<span>bar: interval at the design confidence; ring: estimate; dots: per-block ratios</span></div>')
