"""The one formatting policy for every number and reason the report and the terminal show.

Policy (the page's script mirrors it in `assets.JS`: fmtNs, niceStep):
- quantities (durations, percentages, rates) keep SIG = 3 significant digits: enough to tell
  98.7 ms from 99.1 ms, few enough to read at a glance; trailing zeros are kept so a column
  lines up (1.20 ms), and durations take the largest unit that keeps them >= 1;
- ratios near 1 keep RATIO_SIG = 4 significant digits: 0.9946 and 1.009 must stay apart
  when the noise floor is under 1 %;
- counts are integers with thousands separators; identifiers (seed, step id, rank) are
  plain integers: 20261130, never "20,261,130";
- axis ticks fall on round values, 1, 2 or 5 x 10^k (`nice_ticks`), printed with no more
  digits than the tick step needs;
- text from records never shows a Python repr: `reason()` turns "sources=['host', 'nvml']"
  into "sources: host, nvml".

`num(value, unit, src)` renders `<span class="n" data-src="RECORD:/json/pointer" data-v=VALUE>`
so the numbers test can read every shown number back and compare it with the record.
"""

from __future__ import annotations

import html
import json
import math
import re

DASH = "—"
MINUS = "−"  # U+2212: a minus sign as wide as the plus, so signed columns line up
SIG = 3
RATIO_SIG = 4
_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def sig(v: float, digits: int = SIG) -> str:
    """v rounded to `digits` significant digits, in plain decimal (never exponent notation)."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    mag = math.floor(math.log10(abs(v)))
    decimals = max(digits - 1 - mag, 0)
    r = round(v, decimals)
    if r != 0 and math.floor(math.log10(abs(r))) > mag:  # 9.996 -> 10.0: one digit fewer
        decimals = max(decimals - 1, 0)
    return f"{r:.{decimals}f}"


def _signed(text: str, v: float, signed: bool) -> str:
    if text.startswith("-"):
        return MINUS + text[1:]
    return ("+" + text) if signed and v > 0 else text


def ns(v: float | int | None, *, signed: bool = False) -> str:
    """A duration in the largest unit that keeps it >= 1, SIG significant digits."""
    if v is None:
        return DASH
    a = abs(float(v))
    for div, unit in _UNITS:
        if a >= div or div == 1.0:
            # rounding may carry into the next unit (999.7 µs -> 1.00 ms)
            text = sig(float(v) / div)
            if div < 1e9 and abs(float(text)) >= 1000:
                bigger = {1.0: (1e3, "µs"), 1e3: (1e6, "ms"), 1e6: (1e9, "s")}[div]
                text, unit = sig(float(v) / bigger[0]), bigger[1]
            if div == 1.0:
                text = f"{float(v):.0f}"
            return f"{_signed(text, float(v), signed)} {unit}"
    raise AssertionError("unreachable")


def ns_signed(v) -> str:
    return ns(v, signed=True)


def plain(v, unit: str = "") -> str:
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        text = _signed(f"{v:,}", v, False)
    elif isinstance(v, float):
        text = _signed(sig(v), v, False) if math.isfinite(v) else str(v)
    else:
        text = str(v)
    return f"{text} {unit}".rstrip()


def ident(v) -> str:
    """An identifier that happens to be a number (seed, step id, rank): as written, no separators."""
    return DASH if v is None else str(v)


def pct(v: float | None) -> str:
    """A signed percentage change."""
    return DASH if v is None else _signed(sig(v), v, True) + "%"


def pct_abs(v: float | None) -> str:
    """An unsigned percentage (a noise floor, a detectable effect)."""
    return DASH if v is None else sig(abs(v)) + "%"


def ratio(v: float | None) -> str:
    return DASH if v is None else sig(v, RATIO_SIG)


def ratio_as_pct(v: float | None) -> str:
    """A ratio B/A shown as the percentage change it means (0.75 -> −25.0%)."""
    return DASH if v is None else pct((v - 1.0) * 100.0)


def log_as_pct(v: float | None) -> str:
    """A log ratio shown as the percentage change it means."""
    return DASH if v is None else pct((math.exp(v) - 1.0) * 100.0)


def share(v: float | None) -> str:
    """A fraction 0..1 shown as a percentage of the whole."""
    return DASH if v is None else sig(v * 100.0) + "%"


FORMATTERS = {"ns": ns, "ns_signed": ns_signed, "pct": pct, "pct_abs": pct_abs, "ratio": ratio,
              "ratio_pct": ratio_as_pct, "log_pct": log_as_pct, "share": share, "id": ident,
              "": plain, "count": plain}


def text_of(value, unit: str) -> str:
    return FORMATTERS.get(unit, lambda v: plain(v, unit))(value)


def nice_step(span: float, n: int) -> float:
    """The round tick step (1, 2 or 5 x 10^k) giving about n ticks over span."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(n, 1)
    p = 10.0 ** math.floor(math.log10(raw))
    m = raw / p
    return (1 if m < 1.5 else 2 if m < 3.5 else 5 if m < 7.5 else 10) * p


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values within [lo, hi], about n of them (multiples of nice_step)."""
    step = nice_step(hi - lo, n)
    k0, k1 = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    return [round(k * step, 12) for k in range(k0, k1 + 1)]


def tick_label(v: float, step: float, unit: str = "") -> str:
    """A tick printed with just the decimals its step needs (10 ms, 12.5 ms, 0.2%)."""
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    text = f"{v:.{decimals}f}"
    if float(text) == 0:
        text = "0"
    return _signed(text, v, unit == "%" and v != 0) + (unit if unit == "%" else (f" {unit}" if unit else ""))


def ns_tick_unit(step_ns: float) -> tuple[float, str]:
    """The unit ticks of this step are printed in (the step's own: 2 ms ticks print as ms)."""
    for div, unit in _UNITS:
        if step_ns >= div:
            return div, unit
    return 1.0, "ns"


_LIST_REPR = re.compile(r"""\[\s*((?:'[^'\]]*'|"[^"\]]*")(?:\s*,\s*(?:'[^'\]]*'|"[^"\]]*"))*)?\s*\]""")
_QUOTED = re.compile(r"""'([^']*)'|"([^"]*)\"""")
_KEY_EQ = re.compile(r"\b([a-z_][a-z0-9_]*)=(?=\S)")


def reason(text) -> str:
    """A reason or note from a record as readable text: Python list reprs become comma lists,
    `key=value` becomes `key: value`, None/True/False become words."""
    if text is None:
        return "no reason recorded"
    s = str(text)

    def _list(m: re.Match) -> str:
        items = [a or b for a, b in _QUOTED.findall(m.group(1) or "")]
        return ", ".join(items) if items else "none"

    s = _LIST_REPR.sub(_list, s)
    s = _KEY_EQ.sub(lambda m: f"{m.group(1).replace('_', ' ')}: ", s)
    # only where a repr put them (after "key: " or alone in parentheses), not in prose ("None of ...")
    for word, said in (("None", "none"), ("True", "yes"), ("False", "no")):
        s = re.sub(rf"(?<=: ){word}\b|(?<=\(){word}(?=\))", said, s)
    return s


def name(check: str) -> str:
    """A check or cause name as words (input_starvation -> input starvation)."""
    return str(check).replace("_", " ")


def changes(ch: dict | None) -> str:
    """An arm's changes as a command-line reader would write them (no JSON, no repr)."""
    if not ch:
        return "none (the incident's own workload)"
    parts = []
    for flag, val in (ch.get("set_args") or {}).items():
        parts.append(f"{flag} {val}")
    for flag in ch.get("remove_args") or []:
        parts.append(f"without {flag}")
    if ch.get("append_args"):
        parts.append("append " + " ".join(map(str, ch["append_args"])))
    for k, v in (ch.get("env") or {}).items():
        parts.append(f"{k}={v}")
    if ch.get("patch") is not None:
        parts.append("a source patch")
    if ch.get("git_ref") is not None:
        parts.append(f"sources at git ref {ch['git_ref']}")
    known = {"set_args", "remove_args", "append_args", "env", "patch", "git_ref"}
    for k, v in ch.items():
        if k not in known:
            parts.append(f"{name(k)}: {reason(v) if isinstance(v, str) else json.dumps(v, sort_keys=True)}")
    return ", ".join(parts) or "none"


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
