"""Excess attribution: why was this step slower than the typical step of its rank?

Typical reference (per rank): the median wall of the rank's comparable steps, i.e. every step
after the first `warmup_steps` (those pay for context creation, handles, allocator growth and
autotuning once). The median is robust to the slow steps themselves: up to half the steps can
be slow without moving it. With fewer than `min_comparable_steps` comparable steps there is no
reference and `excess` is null; warm-up steps get null too.

Split of a positive excess (`excess_ns = wall_ns - typical_ns`): each step's findings already
credit disjoint time to causes (credit.py). Per cause, the typical amount is the median
of that cause's credited ns over the comparable steps; the step's growth in a cause is
max(0, credited - typical). Busy time (gpu_work and gpu_bound) is the cause
"gpu_work_growth", host-only span time "host_work", every other cause keeps its check's name.
The growths are overlap-free (they come from disjoint credits); when their sum exceeds the
excess (medians do not add, other causes may have shrunk) they are scaled down together to
the excess, so `sum(by_cause) + unexplained_ns == excess_ns`.
"""

from __future__ import annotations

import numpy as np

from . import measures
from .checks import NAMES
from .fast import searchsorted

BUSY_CHECKS = ("gpu_work", "gpu_bound")
MAX_SLOW_LISTED = 20
_MAX_TYPICAL_SAMPLE = 2000  # comparable steps sampled for the per-kernel typical (bounded memory)


def cause_of(check: str) -> str:
    return "gpu_work_growth" if check in BUSY_CHECKS else check


def slow_steps(records: list[dict], factor: float) -> list[dict]:
    """Steps at least `factor` x typical, largest excess first (at most MAX_SLOW_LISTED)."""
    out = []
    for r in records:
        x = r["excess"]  # every step record has it (null outside the reference): columns.step_dict
        if x is None or x["typical_ns"] <= 0 or r["wall_ns"] < factor * x["typical_ns"]:
            continue
        out.append({"rank": r["rank"], "step_id": r["step_id"], "wall_ns": r["wall_ns"], "typical_ns": x["typical_ns"],
                    "excess_ns": x["excess_ns"], "by_cause": dict(x["by_cause"]), "unexplained_ns": x["unexplained_ns"]})
    out.sort(key=lambda s: (-s["excess_ns"], s["rank"] if s["rank"] is not None else -1, s["step_id"]))
    return out[:MAX_SLOW_LISTED]


def grew(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, names, ev_start: np.ndarray, ev_end: np.ndarray,
         slow: np.ndarray, comp: np.ndarray, limit: int = 5) -> list[dict[str, int]]:
    """Per slow step: the names (kernels or host spans) whose time in the step grew most over
    their median time in the comparable steps, {name: delta_ns}. Vectorized: each interval is
    assigned to the step its start falls in by a binary search."""
    if slow.size == 0 or ev_start.size == 0:
        return [{} for _ in slow]
    k = searchsorted(starts, ev_start, side="right") - 1
    kk = np.maximum(k, 0)
    # Intervals enclosing the whole step (the step's own span, a whole-run wrapper) are not growth.
    ok = (k >= 0) & (ev_start < ends[kk]) & ~((ev_start <= starts[kk]) & (ev_end >= ends[kk]))
    dur = (ev_end - ev_start)[ok]
    k, c = k[ok], codes[ok]
    ncode = int(codes.max()) + 1 if codes.size else 1
    sample = comp if comp.size <= _MAX_TYPICAL_SAMPLE else comp[np.linspace(0, comp.size - 1, _MAX_TYPICAL_SAMPLE).astype(np.int64)]
    out = []
    for s in slow:
        m = k == s
        per = np.bincount(c[m], weights=dur[m], minlength=ncode)
        top = np.argsort(-per)[: 4 * limit]
        top = top[per[top] > 0]
        if top.size == 0:
            out.append({})
            continue
        mat = np.zeros((sample.size, top.size))
        pos = {int(t): j for j, t in enumerate(top)}
        sel = np.isin(k, sample) & np.isin(c, top)
        row = searchsorted(sample, k[sel])
        colj = np.array([pos[int(x)] for x in c[sel]], np.int64) if sel.any() else np.zeros(0, np.int64)
        np.add.at(mat, (row, colj), dur[sel])
        delta = per[top] - np.median(mat, axis=0)
        order = np.argsort(-delta)[:limit]
        out.append({str(names[int(top[j])]): int(delta[j]) for j in order if delta[j] > 0})
    return out



def attach_columns(wall: np.ndarray, explains: np.ndarray, opts) -> dict:
    """The excess of one rank's steps held as columns (diagnose/columns.py): explains is
    (steps, checks) in checks.NAMES order. Returns {} without a reference, else the typical
    step, the comparable rows, the causes, each step's excess and by-cause split (an int
    matrix) and each finding's share of the excess (NaN where null)."""
    n = int(wall.size)
    comp = np.arange(opts.warmup_steps, n)
    if comp.size < opts.min_comparable_steps:
        return {}
    typical = int(np.median(wall[comp]))
    causes = sorted({cause_of(c) for c in NAMES})
    of = np.array([causes.index(cause_of(c)) for c in NAMES], np.int64)
    amt = np.zeros((n, len(causes)), np.int64)
    for j in range(len(NAMES)):
        amt[:, of[j]] += explains[:, j]
    typ = np.median(amt[comp], axis=0).astype(np.int64)
    by = amt  # the growth over the typical amount, in place (a matrix of steps x causes)
    by -= typ
    np.maximum(by, 0, out=by)
    in_comp = np.zeros(n, bool)
    in_comp[comp] = True
    ex = (wall - typical).astype(np.int64)
    tot = by.sum(axis=1).astype(float)  # the sum of the float growths (exact below 2**53)
    over = in_comp & (ex > 0) & (tot > ex)
    by[over] = np.floor(by[over].astype(float) * (ex[over] / tot[over])[:, None]).astype(np.int64)
    by[~(in_comp & (ex > 0))] = 0
    unexplained = np.where(ex > 0, np.maximum(ex - by.sum(axis=1), 0), 0)
    share = np.full(explains.shape, np.nan)
    pos = in_comp & (ex > 0)
    if pos.any():
        s = by[:, of][pos] / ex[pos][:, None]
        busy = np.array([cause_of(c) == "gpu_work_growth" for c in NAMES], bool)
        s[:, busy] = np.where(explains[pos][:, busy] == 0, 0.0, s[:, busy])
        nz = s != 0
        s[nz] = measures.round6(s[nz])  # Python's round (to 6 places)
        share[pos] = s
    return {"typical_ns": typical, "comparable": comp, "in_comp": in_comp, "causes": causes, "excess_ns": ex,
            "by_cause": by, "unexplained_ns": unexplained, "share": share,
            "typical_by_cause": {c: int(typ[k]) for k, c in enumerate(causes)}}


def excess_of(ex: dict, k: int) -> dict | None:
    """Step k's `excess` object from attach_columns' result (None outside the reference)."""
    if not ex or not ex["in_comp"][k]:
        return None
    row = ex["by_cause"][k]
    return {"typical_ns": ex["typical_ns"], "excess_ns": int(ex["excess_ns"][k]),
            "by_cause": {c: int(row[i]) for i, c in enumerate(ex["causes"]) if row[i] > 0},
            "unexplained_ns": int(ex["unexplained_ns"][k])}


def fill_record(rec: dict, ex: dict, k: int) -> None:
    """Set a step record's excess and its findings' share_of_excess from attach_columns."""
    rec["excess"] = excess_of(ex, k)
    for j, f in enumerate(rec["findings"]):
        v = ex["share"][k, j] if ex else np.nan
        f["share_of_excess"] = None if np.isnan(v) else float(v)


def slow_rows(ex: dict, wall: np.ndarray, factor: float, ids: np.ndarray) -> np.ndarray:
    """Rows of the steps slow_steps() lists for one rank (largest excess first, at most
    MAX_SLOW_LISTED), from attach_columns' result."""
    if not ex or ex["typical_ns"] <= 0:
        return np.zeros(0, np.int64)
    rows = np.flatnonzero(ex["in_comp"] & (wall >= factor * ex["typical_ns"]))
    order = np.lexsort((ids[rows], -ex["excess_ns"][rows]))  # slow_steps' order within a rank
    return rows[order][:MAX_SLOW_LISTED]
