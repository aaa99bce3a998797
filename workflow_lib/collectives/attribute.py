"""Who waited on whom, per matched op.

Two measures, the first that the data allows:
  gpu_duration  every rank's GPU duration of the op is known (CUDA events / NCCL kernel).
                A collective ends at about the same moment on every rank, so the rank with
                the shortest duration arrived last, and each other rank waited
                duration_r - duration_late. No clocks are compared; uncertainty is
                Options.duration_uncertainty_ns.
  host_arrival  otherwise, arrival times (GPU start if known for every rank, else host
                enqueue) on timelines that clocks.py says are comparable; the latest
                arrival is the late rank and rank r waited arrival_late - arrival_r. The
                uncertainty is the clock relation's. A host enqueue skew is an upper bound
                on the GPU wait (the early rank's GPU may have been busy anyway).

Only ops that every member completed are measured; an op some member has not completed
gets verdict `pending` (a hang state) and no wait, whatever its enqueue skew.

Verdict per measured op, with U the uncertainty and W the largest wait:
  attributed      W > min_wait_ns, W > U and the late rank leads the next-latest by > U
  not_attributed  W + U <= min_wait_ns (surely no wait worth naming)
  unresolved      anything else (e.g. a skew within a cross-host clock uncertainty)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.incident import Incident
from .load import to_pandas
from .match import KEY
from .types import (ATTRIBUTED, MATCHED, NOT_ATTRIBUTED, PENDING, PROGRESS_COMPLETED, PROGRESS_PENDING, UNRESOLVED,
                    ClockDomain, Options, RankSource)


def _pivot(g: pd.DataFrame, col: str, keys: pd.MultiIndex, ranks: list[int]) -> np.ndarray:
    p = g.set_index(KEY + ["rank"])[col].unstack("rank")
    return p.reindex(index=keys, columns=ranks).astype("float64").to_numpy(na_value=np.nan)


def _relative(g: pd.DataFrame, offsets: dict[int, int]) -> pd.DataFrame:
    """Arrival columns on the common timeline, minus one integer base, as exact small floats.

    Realtime ns (~1.8e18) lose ~256 ns in a float64; after the Int64 subtraction the
    values are seconds-to-days in ns and exact.
    """
    g = g.copy()
    off = g["rank"].map(offsets).astype("Int64")
    ref = {c: g[c].astype("Int64") + off for c in ("enqueue_ns", "gpu_start_ns")}
    base = min((int(v.min()) for v in ref.values() if v.notna().any()), default=0)
    for c, v in ref.items():
        g[c] = v - base
    g["gpu_duration_ns"] = g["gpu_duration_ns"].astype("Int64")
    return g


def _clock_relation(ranks: list[int], sources: dict[int, RankSource], doms: dict[str, ClockDomain]):
    """Per-rank offsets to a common timeline and the pairwise uncertainty, or None if not comparable."""
    ds = [doms[r] for r in ranks]
    if len({d.group for d in ds}) != 1:
        return None
    if any(d.offset_ns is None or d.uncertainty_ns is None for d in ds):
        return None
    offsets = [int(d.offset_ns) for d in ds]
    unc = sorted((d.uncertainty_ns for d in ds), reverse=True)
    return offsets, int(sum(unc[:2])), sorted({d.how for d in ds})


def _second(x: np.ndarray, largest: bool) -> np.ndarray:
    s = np.sort(x, axis=1)
    if x.shape[1] < 2:
        return np.full(x.shape[0], np.nan)
    return s[:, -2] if largest else s[:, 1]


def attribute_comm(g: pd.DataFrame, ops: pd.DataFrame, sources: dict[int, RankSource],
                   doms: dict[str, ClockDomain], opts: Options) -> list[dict]:
    """Attribution dicts for the matched ops `ops` of one communicator (same order)."""
    ranks = list(ops["expected_ranks"].iloc[0])
    keys = pd.MultiIndex.from_frame(ops[KEY])
    rel = _clock_relation(ranks, sources, doms)
    comparable = rel is not None
    g = _relative(g, dict(zip(ranks, rel[0])) if comparable else {r: 0 for r in ranks})
    enq, start = _pivot(g, "enqueue_ns", keys, ranks), _pivot(g, "gpu_start_ns", keys, ranks)
    dur = _pivot(g, "gpu_duration_ns", keys, ranks)
    n = len(keys)
    has_dur = ~np.isnan(dur).any(axis=1)
    use_start = ~np.isnan(start).any(axis=1)
    arr = np.where(use_start[:, None], start, enq)
    has_arr = ~np.isnan(arr).any(axis=1)
    clock_unc = rel[1] if comparable else None

    with np.errstate(invalid="ignore"):
        safe_dur = np.where(np.isnan(dur), np.inf, dur)
        late_d = np.argmin(safe_dur, axis=1)
        wait_d = dur - dur[np.arange(n), late_d][:, None]
        margin_d = _second(dur, largest=False) - dur[np.arange(n), late_d]
        safe_arr = np.where(np.isnan(arr), -np.inf, arr)
        late_a = np.argmax(safe_arr, axis=1)
        wait_a = arr[np.arange(n), late_a][:, None] - arr
        margin_a = arr[np.arange(n), late_a] - _second(arr, largest=True)
        skew = np.nanmax(arr, axis=1) - np.nanmin(arr, axis=1) if arr.size else np.zeros(n)

    out = []
    for i in range(n):
        a: dict = {"method": None, "late_rank": None, "wait_ns": {}, "uncertainty_ns": None,
                   "arrival": "gpu_start" if use_start[i] else "host_enqueue",
                   "arrival_skew_ns": int(skew[i]) if comparable and has_arr[i] else None,
                   "host_late_rank": ranks[late_a[i]] if comparable and has_arr[i] else None,
                   "clock": rel[2] if comparable else ["not_comparable"]}
        if has_dur[i]:
            a["method"], late, waits, unc, margin = "gpu_duration", late_d[i], wait_d[i], opts.duration_uncertainty_ns, margin_d[i]
        elif comparable and has_arr[i]:
            a["method"], late, waits, unc, margin = "host_arrival", late_a[i], wait_a[i], clock_unc, margin_a[i]
        else:
            a.update(verdict=UNRESOLVED, reason="no GPU durations on every rank and the ranks' host clocks cannot be compared (no recorded calibration)")
            out.append(a)
            continue
        wmax = float(np.nanmax(waits))
        a.update(late_rank=ranks[late], uncertainty_ns=int(unc),
                 wait_ns={str(r): int(round(w)) for r, w in zip(ranks, waits) if r != ranks[late]})
        if wmax + unc <= opts.min_wait_ns:
            a.update(verdict=NOT_ATTRIBUTED, reason=f"largest wait {int(wmax)} ns (+/- {unc}) is below min_wait_ns {opts.min_wait_ns}")
        elif wmax <= unc:
            a.update(verdict=UNRESOLVED, reason=f"largest wait {int(wmax)} ns is within the uncertainty {unc} ns")
        elif wmax <= opts.min_wait_ns:
            a.update(verdict=UNRESOLVED, reason=f"largest wait {int(wmax)} ns could exceed min_wait_ns {opts.min_wait_ns} within +/- {unc} ns")
        elif not (margin > unc):
            a.update(verdict=UNRESOLVED, reason=f"the two latest ranks arrived within {unc} ns of each other; cannot single one out")
        else:
            a.update(verdict=ATTRIBUTED, reason=f"rank {ranks[late]} arrived last; others waited up to {int(wmax)} ns")
        out.append(a)
    return out


class HostContext:
    """What a rank's host was doing in a window: spans, blocking CUDA calls, scheduler state."""

    def __init__(self, incidents: list[Incident]):
        self._inc = {str(i.path): i for i in incidents}
        self._cache: dict[tuple[str, str], pd.DataFrame] = {}

    def _table(self, incident: str, name: str) -> pd.DataFrame:
        key = (incident, name)
        if key not in self._cache:
            self._cache[key] = to_pandas(self._inc[incident].table(name))
        return self._cache[key]

    def _mine(self, t: pd.DataFrame, incident: str, rank: int) -> pd.DataFrame:
        # Rows without a rank belong to this rank only in a single-rank incident.
        alone = (self._inc[incident].manifest.get("ranks") or []) == [rank]
        return t[(t["rank"] == rank) | (t["rank"].isna() & alone)]

    def around(self, incident: str, rank: int, lo: int, hi: int) -> dict:
        spans = self._mine(self._table(incident, "spans"), incident, rank)
        api = self._mine(self._table(incident, "runtime_api"), incident, rank)
        sched = self._mine(self._table(incident, "sched"), incident, rank)
        out: dict = {"window_ns": [int(lo), int(hi)]}
        if spans.empty and api.empty and sched.empty:
            out.update(observed=False, reason=f"no spans, runtime_api or sched rows for rank {rank} in {incident}")
            return out
        out["observed"] = True
        sp = spans[(spans["end_ns"] > lo) & (spans["start_ns"] < hi)].copy()
        sp["overlap_ns"] = np.minimum(sp["end_ns"], hi) - np.maximum(sp["start_ns"], lo)
        out["spans"] = [{"name": r.name, "depth": int(r.depth), "thread_id": int(r.thread_id), "overlap_ns": int(r.overlap_ns)}
                        for r in sp.sort_values("overlap_ns", ascending=False).head(5).itertuples()]
        sy = api[api["is_sync"] & (api["end_ns"] > lo) & (api["start_ns"] < hi)].copy()
        sy["overlap_ns"] = np.minimum(sy["end_ns"], hi) - np.maximum(sy["start_ns"], lo)
        out["sync_calls"] = {"count": int(len(sy)), "overlap_ns": int(sy["overlap_ns"].sum()),
                             "names": sorted(sy["name"].unique().tolist())[:5]}
        sc = sched[(sched["ts_ns"] >= lo) & (sched["ts_ns"] <= hi)]
        if sc.empty:
            out["sched"] = None
        else:
            rq = sc.groupby("thread_id")["runqueue_wait_ns"].agg(lambda s: s.max() - s.min() if s.notna().any() else 0)
            out["sched"] = {"samples": int(len(sc)), "states": {k: int(v) for k, v in sc["state"].value_counts().items()},
                            "runqueue_wait_ns": int(rq.max()) if len(rq) else 0}
        return out


def _pending(op) -> dict:
    why = ("no member completed this op: the job hung here (or the dumps were taken while it ran); "
           "a pending op has no measured wait") if op["progress"] == PROGRESS_PENDING else \
        "some members completed this op and others did not: a hang state, no measured wait"
    return {"verdict": PENDING, "reason": why, "method": None, "late_rank": None, "wait_ns": {}, "uncertainty_ns": None,
            "arrival": "host_enqueue", "arrival_skew_ns": None, "host_late_rank": None, "clock": []}


def attribute(ops: pd.DataFrame, ident: pd.DataFrame, sources: dict[int, RankSource], doms: dict[str, ClockDomain],
              incidents: list[Incident], opts: Options) -> list[dict | None]:
    """One attribution per op (None for ops that are not matched), in `ops` order."""
    result: list[dict | None] = [None] * len(ops)
    host = HostContext(incidents)
    # Only an op every member completed has a wait to measure; one that some member has
    # not completed is a hang state, whatever its host enqueue skew says.
    for pos in np.flatnonzero((ops["progress"] != PROGRESS_COMPLETED).to_numpy()):
        result[pos] = _pending(ops.iloc[pos])
    matched = ops[(ops["status"] == MATCHED) & (ops["progress"] == PROGRESS_COMPLETED)]
    for comm, m in matched.groupby("comm", sort=False):
        g = ident[ident["comm"] == comm]
        for pos, a in zip(m.index, attribute_comm(g, m, sources, doms, opts)):
            if a["verdict"] == ATTRIBUTED:
                late = a["late_rank"]
                row = g[(g["rank"] == late) & (g["seq_id"] == ops.at[pos, "seq_id"]) & (g["sub"] == ops.at[pos, "sub"])].iloc[0]
                t = row["enqueue_ns"] if pd.notna(row["enqueue_ns"]) else row["gpu_start_ns"]
                if pd.notna(t):
                    # While the others waited, the late rank's host was on its way here:
                    # look back by the largest wait, on the late rank's own timeline.
                    back = max(a["wait_ns"].values()) + opts.host_context_margin_ns
                    a["late_host"] = host.around(sources[late].incident, late, int(t) - back, int(t))
            result[ops.index.get_loc(pos)] = a
    return result
