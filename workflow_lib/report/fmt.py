"""Formatting of shown numbers, and the markup that ties each one to its record field.

`num(value, unit, src)` renders `<span class="n" data-src="RECORD:/json/pointer" data-v=VALUE>`
so the numbers test can read every shown number back and compare it with the record.
"""

from __future__ import annotations

import html
import json
import math

DASH = "—"


def ns(v: float | int | None) -> str:
    """A duration in the largest unit that keeps it >= 1, 4 significant digits."""
    if v is None:
        return DASH
    a = abs(float(v))
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if a >= div:
            return f"{float(v) / div:.4g} {unit}"
    return f"{float(v):.0f} ns"


def plain(v, unit: str = "") -> str:
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        text = f"{v:,}"
    elif isinstance(v, float):
        text = f"{v:.4g}" if math.isfinite(v) else str(v)
    else:
        text = str(v)
    return f"{text} {unit}".rstrip()


def pct(v: float | None) -> str:
    return DASH if v is None else f"{v:+.2f}%"


def ratio(v: float | None) -> str:
    return DASH if v is None else f"{v:.4f}"


FORMATTERS = {"ns": ns, "pct": pct, "ratio": ratio, "": plain, "count": plain}


def text_of(value, unit: str) -> str:
    return FORMATTERS.get(unit, lambda v: plain(v, unit))(value)


def esc(s) -> str:
    return html.escape(str(s), quote=True)


def num(value, unit: str, src: str) -> str:
    """A shown number with its record source (data-src) and exact value (data-v, JSON)."""
    return (f'<span class="n" data-src="{esc(src)}" data-unit="{esc(unit)}" '
            f'data-v="{esc(json.dumps(value))}">{esc(text_of(value, unit))}</span>')


def short(digest: str | None) -> str:
    """A digest shown short, the full value in the title."""
    if not digest:
        return DASH
    return f'<code class="digest" title="{esc(digest)}">{esc(digest[:16])}…</code>'
