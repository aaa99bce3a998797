"""The evidence of a step kept in detail: what each check saw in that step, in its own words.

Verdicts, credit and missing evidence come from the checks' column rules (columns.py) for
every step; the evidence is free-form per check (which calls, which spans, which kernels) and
is made here step by step, by each check's `describe`, for the steps whose evidence is kept
(columns.EVIDENCE_ALL_UP_TO). A claim that overlapped an earlier check's keeps what it claimed
before the overlap (`claimed_before_overlap_ns`), so a reader sees why it was credited less.
"""

from __future__ import annotations

from . import measures
from .batch import ATTRIBUTED
from .checks import CHECKS, NAMES, collective_wait
from .checks.base import CheckInput, make_base
from .evidence import RankInput
from .types import StepWindow

_COLLECTIVE = NAMES.index("collective_wait")


def evidence(ev, src, opts, cols, k: int, cold: dict | None, origin: int, coll: dict | None) -> list[dict]:
    """Step k's evidence per check (NAMES order); `cols` the rank's columns.RankColumns."""
    fr = cols.frame
    sw = StepWindow(int(fr.ids[k]), ev.rank, int(fr.tids[k]), int(fr.starts[k]), int(fr.ends[k]))
    owed = int(cols.lead_owed[k]) if cols.lead_owed is not None else 0
    ci = CheckInput(sw, make_base(sw, ev, opts.min_gap_ns), RankInput(ev, src, opts), cold, owed)
    match = coll.get((ev.rank, sw.step_id)) if coll else None
    out = []
    for j, c in enumerate(CHECKS):
        if j == _COLLECTIVE and match is not None:
            out.append(dict(collective_wait.claim(match, sw, ev).evidence))  # credited first: never overlapped
            continue
        found = c.describe(ci)
        ev_j = dict(found.evidence)
        if cols.verdict[k, j] == ATTRIBUTED:
            claimed = measures.clip(found.claimed, sw.start_ns, sw.end_ns).total_ns
            if claimed != int(cols.explains_ns[k, j]):
                ev_j["claimed_before_overlap_ns"] = claimed
        out.append(ev_j)
    return out
