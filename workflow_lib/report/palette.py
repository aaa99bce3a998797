"""The report's colours, defined once: the page's script receives them in its data block.

Findings (and the causes of a step's excess, which use the same names) are dark, saturated
colours drawn with white text; host spans are light pastels drawn with dark text, assigned
to the most frequent span names. The two sets never share a colour, so a span can never
be read as a finding (the demo once drew every span in host_submission's brown).
"""

from __future__ import annotations

FINDING_COLORS = {
    "gpu_bound": "#0f5f8a", "host_submission": "#8a4b08", "sync_stall": "#b91c1c",
    "input_starvation": "#c2410c", "clock_throttle": "#6d28d9", "launch_bound": "#0e7490",
    "collective_wait": "#1d4ed8", "gpu_work_growth": "#166534", "host_work": "#4d7c0f",
    "transfer_stall": "#a16207", "compilation": "#86198f", "warm_up": "#475569",
    "gc_pause": "#9f1239", "checkpoint_stall": "#3f6212", "kernel_slowdown": "#115e59",
    "first_call": "#57534e",
}
FINDING_OTHER = "#334155"
UNEXPLAINED = "#cbd5e1"
"""The part of an excess no cause explains: pale grey, drawn last."""

SPAN_PALETTE = ("#a5d8ff", "#ffd8a8", "#b2f2bb", "#d0bfff", "#fcc2d7", "#99e9f2",
                "#ffec99", "#c3fae8", "#eebefa", "#d8f5a2", "#ffc9c9", "#bac8ff")
SPAN_OTHER = "#dee2e6"
"""Span names beyond the palette (the rarer ones) share this grey; the tooltip names them."""


def finding_color(check: str) -> str:
    return FINDING_COLORS.get(check, FINDING_OTHER)


def span_colors(names_by_count: list[str]) -> dict[str, str]:
    """Colour per span name, the most frequent names first; the rest get SPAN_OTHER in the page."""
    return {n: SPAN_PALETTE[i] for i, n in enumerate(names_by_count[:len(SPAN_PALETTE)])}
