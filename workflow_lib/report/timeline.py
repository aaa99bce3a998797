"""Timeline tracks for drawing: the snapshot's tables, decimated so millions of events draw fast.

Every track is either `raw` (each event's exact start/duration from the table, for small
tracks) or `buckets` (the track's interval union as covered nanoseconds per bucket, or
min/max per bucket for sampled metrics). Buckets exist only for drawing: every number the
report prints comes from the records (model.py), never from here.

Times are ns relative to `origin_ns` (the earliest step start, as the diagnosis uses), so
they stay exact in a JavaScript double (< 2**53 ns = 104 days).

A source that was not observed yields a track with `status: "not_observed"` and its
reason, never an empty (zero) track.
"""

from __future__ import annotations

import base64
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..diagnose import measures, step_tables
from ..diagnose.stored import Diagnosis, as_diagnosis
from ..core.errors import StallcaseError
from ..core.incident import Incident
from ..core.vocabulary import TABLE_SOURCES, rank_key
from . import fmt, palette

RAW_TRACK_LIMIT = 40_000
"""A track with more events than this is drawn from buckets: 40k rectangles still draw in a
few milliseconds, and 40k events cost about 0.6 MB of inline JSON."""
RAW_TOTAL_BUDGET = 250_000
"""Raw events across all tracks: keeps the page under ~4 MB of event data however many
tracks there are (the 10 MB page limit leaves room for buckets and records)."""
BUCKETS = 16_384
"""Buckets per decimated track over the whole window: ~8 screen widths, so the first zoom
levels stay sharp; each costs 1 byte (coverage) or 8 bytes (min/max) before base64."""
MAX_SPAN_ROWS = 6
"""Nesting levels of host spans drawn on their own rows; deeper spans share the last row."""
MAX_NAMES = 512
"""Distinct event names kept per track for tooltips; rarer names are shown as '(other)'."""

SOURCE_ALIASES = TABLE_SOURCES  # the report's name for the one map (html.py reads it)

NVML_METRICS = (("gpu_util_pct", "NVML utilization", "%"), ("sm_clock_mhz", "SM clock", "MHz"))


def source_status(incident: Incident, table: str) -> tuple[bool, str | None]:
    """(observed, reason): from the manifest's sources; a table with rows counts as observed."""
    sources = incident.typed_manifest.sources
    reasons = []
    for name in SOURCE_ALIASES.get(table, (table,)):
        if name not in sources:
            continue
        src = sources[name]
        if src.status == "observed":
            return True, None
        reasons.append(f"{name}: {fmt.reason(src.reason)}")
    if incident.table(table).num_rows:
        return True, None
    if reasons:
        return False, "; ".join(reasons)
    return False, f"no '{table}' table and no source recorded for it"


def _i64(col) -> np.ndarray:
    return np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False), dtype=np.int64)


_rank_key = rank_key  # null rank (single process) -> -1, so groups are plain ints


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted union of [start, end) intervals: the diagnosis's own (one definition of busy)."""
    u = measures.union(starts, ends)
    return u.start_ns, u.end_ns


def coverage(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int, n: int) -> np.ndarray:
    """Fraction of each of n equal buckets over [lo, hi) covered by the union of the intervals."""
    us, ue = union(starts, ends)
    edges = lo + (np.arange(n + 1, dtype=np.float64) * ((hi - lo) / n))
    if us.size == 0:
        return np.zeros(n)
    before = np.concatenate([[0], np.cumsum(ue - us)])  # covered ns before interval k
    k = np.searchsorted(us, edges, side="right") - 1
    kk = np.clip(k, 0, us.size - 1)
    inside = np.clip(edges - us[kk], 0, (ue - us)[kk])
    covered_to = np.where(k < 0, 0.0, before[kk] + inside)
    width = (hi - lo) / n
    return np.clip(np.diff(covered_to) / width, 0.0, 1.0)


def minmax(ts: np.ndarray, values: np.ndarray, lo: int, hi: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-bucket min and max of samples (NaN where a bucket holds no sample)."""
    b = np.clip(((ts - lo) * (n / max(hi - lo, 1))).astype(np.int64), 0, n - 1)
    mn = np.full(n, np.nan)
    mx = np.full(n, np.nan)
    if ts.size:
        order = np.argsort(b, kind="stable")
        bs, vs = b[order], values[order]
        first = np.flatnonzero(np.r_[True, bs[1:] != bs[:-1]])
        mn[bs[first]] = np.minimum.reduceat(vs, first)
        mx[bs[first]] = np.maximum.reduceat(vs, first)
    return mn, mx


def _b64(arr: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode("ascii")


def _names(names: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Distinct names (most frequent first, capped) and each event's index into them."""
    if names.size == 0:
        return [], np.zeros(0, np.int64)
    uniq, inv, counts = np.unique(names.astype(str), return_inverse=True, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:MAX_NAMES]
    table = [str(uniq[i]) for i in order]
    remap = np.full(uniq.size, len(table), dtype=np.int64)
    remap[order] = np.arange(order.size)
    if order.size < uniq.size:
        table.append("(other)")
    return table, remap[inv]


class _Budget:
    """Hands out raw-event allowance, smallest tracks first (see build)."""

    def __init__(self, total: int):
        self.left = total

    def take(self, n: int) -> bool:
        if n <= RAW_TRACK_LIMIT and n <= self.left:
            self.left -= n
            return True
        return False


def _interval_track(tid: str, group: str, label: str, starts, ends, names, extra: dict | None,
                    lo: int, hi: int, raw: bool, *, kind: str = "intervals") -> dict:
    """A track of intervals: raw (exact, sorted by start) or union coverage buckets."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    tr = {"id": tid, "group": group, "label": label, "kind": kind, "status": "observed", "count": int(s.size)}
    if raw:
        table, idx = _names(names[order] if names is not None else np.zeros(0, object))
        tr.update(encoding="raw", start=np.diff(s, prepend=0).tolist(), dur=(e - s).tolist(),
                  max_dur=int((e - s).max()) if s.size else 0, names=table,
                  name=idx.tolist() if names is not None else [])
        for key, col in (extra or {}).items():
            tr[key] = np.asarray(col)[order].tolist()
    else:
        if kind == "enqueued":  # instants: mark the bucket each falls in
            e = s + max((hi - lo) // BUCKETS, 1)
        cov = np.round(coverage(s, e, lo, hi, BUCKETS) * 255).astype(np.uint8)
        tr.update(encoding="buckets", buckets=BUCKETS, coverage=_b64(cov))
    return tr


def _missing(tid: str, group: str, label: str, reason: str) -> dict:
    return {"id": tid, "group": group, "label": label, "kind": "missing", "status": "not_observed", "reason": reason}


def _empty(tid: str, group: str, label: str, what: str) -> dict:
    """A source that was observed but recorded nothing here: said so, not drawn as zero."""
    return {"id": tid, "group": group, "label": label, "kind": "empty", "status": "observed",
            "reason": f"observed, but no {what} in the window"}


def _rank_label(rk: int) -> str:
    return "" if rk < 0 else f"rank {rk} "


def _rel(table: pa.Table, col: str, origin: int) -> np.ndarray:
    return _i64(table[col]) - origin


def _extent(incident: Incident) -> tuple[int, int]:
    """First and last time any event of the incident covers (NVML samples only when nothing else:
    the sampler's buffer reaches seconds before the first step and would squash the view)."""
    lows, highs = [], []
    for name in ("steps", "spans", "kernels", "memcpy", "runtime_api"):
        t = incident.table(name)
        if t.num_rows:
            lows.append(pc.min(t["start_ns"]).as_py())
            highs.append(pc.max(t["end_ns"]).as_py())
    c = incident.table("collectives")
    for col in ("enqueue_ns", "gpu_start_ns", "gpu_end_ns"):
        if c.num_rows and c[col].null_count < c.num_rows:
            lows.append(pc.min(c[col]).as_py())
            highs.append(pc.max(c[col]).as_py())
    n = incident.table("nvml")
    if not lows and n.num_rows:
        lows.append(pc.min(n["ts_ns"]).as_py())
        highs.append(pc.max(n["ts_ns"]).as_py())
    if not lows:
        return 0, 1
    return int(min(lows)), int(max(highs))


def build(incident: Incident, diagnosis: Diagnosis | dict | None, *, raw_total: int = RAW_TOTAL_BUDGET) -> dict:
    """All tracks of the incident, in drawing order, with the window they span."""
    steps = incident.table("steps")
    lo_abs, hi_abs = _extent(incident)
    origin = int(_i64(steps["start_ns"]).min()) if steps.num_rows else lo_abs
    lo, hi = lo_abs - origin, max(hi_abs - origin, lo_abs - origin + 1)
    budget = _Budget(raw_total)
    # Candidate tracks are collected with their sizes first; raw allowance goes to the
    # smallest so a single huge track cannot starve all the others of detail.
    pending: list[tuple[int, int, Callable[[bool], dict]]] = []

    def add(n: int, make) -> None:
        pending.append((len(pending), n, make))

    _step_tracks(incident, diagnosis, origin, lo, hi, add)
    if diagnosis is not None:
        _finding_tracks(incident, as_diagnosis(diagnosis), origin, lo, hi, add)
    _host_tracks(incident, origin, lo, hi, add)
    _gpu_tracks(incident, origin, lo, hi, add)
    _nvml_tracks(incident, origin, lo, hi, add)
    _collective_tracks(incident, origin, lo, hi, add)
    raw_ok = {}
    for pos, n, _ in sorted(pending, key=lambda p: p[1]):
        raw_ok[pos] = budget.take(n)
    tracks = [make(raw_ok[pos]) for pos, _, make in pending]
    events = sum(incident.table(t).num_rows for t in ("steps", "spans", "kernels", "memcpy", "runtime_api", "nvml", "collectives"))
    return {"origin_ns": origin, "start_ns": lo, "end_ns": hi, "buckets": BUCKETS, "tracks": tracks, "events": int(events),
            "span_colors": _span_colors(incident)}


def _span_colors(incident: Incident) -> dict[str, str]:
    """One colour per host-span name across all tracks (the most frequent names get the palette)."""
    t = incident.table("spans")
    if t.num_rows == 0:
        return {}
    counts = pc.value_counts(t["name"]).to_pylist()
    names = [c["values"] for c in sorted(counts, key=lambda c: (-c["counts"], str(c["values"])))]
    return palette.span_colors([str(n) for n in names])


def _step_tracks(inc: Incident, diagnosis: dict | None, origin: int, lo: int, hi: int, add) -> None:
    steps = inc.table("steps")
    if steps.num_rows == 0:
        observed, reason = source_status(inc, "steps")
        add(0, lambda raw: _missing("steps:none", "steps", "steps", reason) if not observed
            else _empty("steps:none", "steps", "steps", "steps"))
    rk = _rank_key(steps["rank"])
    s, e = _rel(steps, "start_ns", origin), _rel(steps, "end_ns", origin)
    ids = _i64(steps["step_id"])
    for r in np.unique(rk):
        sel = rk == r
        add(int(sel.sum()), lambda raw, sel=sel, r=r: _interval_track(
            f"steps:{r}", "steps", f"{_rank_label(r)}steps", s[sel], e[sel], None, {"step_id": ids[sel]}, lo, hi, raw,
            kind="steps"))


def _finding_tracks(incident: Incident, diagnosis: Diagnosis, origin: int, lo: int, hi: int, add) -> None:
    """Per step, each attributed finding where the diagnosis says it sits (findings' at_json,
    diagnose/places.py: an input starvation on the step's wait spans, a sync stall on its
    synchronizing calls). Other findings' records say how much time they explain, not where:
    they are drawn as a share of their step from its start (`placed` 0, said so in the
    tooltip). The longest GPU idle gaps, whose positions the diagnosis records, are drawn where
    they were.

    Read from the tables' columns: the shares are a cumulative sum per step, and the places
    are the at_json texts of the findings that have one, read at C speed (_intervals_of).
    """
    st, f = diagnosis.steps_table, diagnosis.findings_table
    s_rank = st["rank"].fill_null(-1).to_numpy()
    s_t0 = st["start_ns"].to_numpy() - origin
    s_wall, s_id = st["wall_ns"].to_numpy(), st["step_id"].to_numpy()
    row = f["step_row"].to_numpy()
    explains = f["explains_ns"].to_numpy()
    check_codes, check_names = step_tables.dict_codes(f["check"])
    keep = step_tables.is_value(step_tables.dict_codes(f["verdict"]), "attributed") & (explains > 0)
    k_row, k_explains, k_check = row[keep], explains[keep], check_codes[keep]
    k_pos = np.flatnonzero(keep)  # findings-table rows: the order the segments are listed in
    k_placed = pc.is_valid(f["at_json"]).to_numpy(zero_copy_only=False)[keep]
    k_rank = s_rank[k_row]
    for r in np.unique(s_rank):  # ranks are few
        mine = k_rank == r
        rows_r, expl_r, chk_r, pos_r = k_row[mine], k_explains[mine], k_check[mine], k_pos[mine]
        shared = ~k_placed[mine]
        # A share of its step from the step's start, after the step's earlier shares.
        w = np.where(shared & (s_wall[rows_r] > 0), expl_r, 0)
        before = np.cumsum(w) - w
        first = np.searchsorted(rows_r, rows_r, side="left")  # rows_r is in step order
        t = s_t0[rows_r] + before - before[first]
        parts = [(np.flatnonzero(shared), t[shared], t[shared] + w[shared], np.zeros(int(shared.sum()), np.int64))]
        placed_j = np.flatnonzero(~shared)
        if placed_j.size:
            a, b, n = _intervals_of(f["at_json"], pos_r[placed_j], origin)
            parts.append((np.repeat(placed_j, n), a, b, np.ones(a.size, np.int64)))
        at = np.concatenate([p[0] for p in parts])
        sub = np.concatenate([np.arange(p[0].size) for p in parts])
        order = np.lexsort((sub, at))
        seg_s = np.concatenate([p[1] for p in parts])[order].astype(np.int64)
        seg_e = np.concatenate([p[2] for p in parts])[order].astype(np.int64)
        seg_placed = np.concatenate([p[3] for p in parts])[order]
        seg_j = at[order]
        seg_check = np.array(check_names, object)[chk_r[seg_j]] if seg_j.size else np.zeros(0, object)
        seg_step = s_id[rows_r[seg_j]] if seg_j.size else np.zeros(0, np.int64)
        gap_s, gap_e = _gaps_of(st, np.flatnonzero(s_rank == r), origin)

        def make(raw, seg_s=seg_s, seg_e=seg_e, seg_check=seg_check, seg_step=seg_step, seg_placed=seg_placed, r=r):
            tr = _interval_track(f"findings:{r}", "findings", f"{_rank_label(r)}findings", seg_s, seg_e, seg_check,
                                 {"step_id": seg_step, "placed": seg_placed}, lo, hi, raw, kind="findings")
            # placed findings on the first row, shares of a step on the second: they would overlap
            tr["rows"] = 2 if (0 in seg_placed and 1 in seg_placed) else 1
            return tr

        # Findings are at most checks x steps, but a long incident has many steps: they take
        # their share of the raw budget like any track. None attributed: said, not an empty row.
        if seg_s.size:
            add(int(seg_s.size), make)
        else:
            add(0, lambda raw, r=r: _empty(f"findings:{r}", "findings", f"{_rank_label(r)}findings", "attributed finding"))
        if gap_s.size:
            add(int(gap_s.size), lambda raw, gs=gap_s, ge=gap_e, r=r: _interval_track(
                f"gaps:{r}", "findings", f"{_rank_label(r)}longest GPU idle gaps", gs, ge, None, None, lo, hi, raw,
                kind="gaps"))


def _intervals_of(col: pa.ChunkedArray, rows: np.ndarray, origin: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, count per row) of the at_json texts of these findings rows (relative ns).
    at_json is canonical JSON (sorted keys: end_ns, start_ns; no other digits), so its numbers,
    read in order, are the intervals' fields two by two (as _gaps_of reads the gaps)."""
    texts = col.take(pa.array(rows, pa.int64())).to_pylist()
    counts = np.fromiter((t.count("{") for t in texts), np.int64, count=len(texts))
    nums = np.array("".join(texts).encode().translate(_NOT_NUMBER).split(), dtype=np.int64).reshape(-1, 2)
    if nums.shape[0] != int(counts.sum()) or np.any(nums[:, 0] <= nums[:, 1]):
        raise StallcaseError(None, "diagnosis findings table: at_json is not canonical (end_ns, start_ns)")
    return nums[:, 1] - origin, nums[:, 0] - origin, counts


GAPS_READ = 100_000
"""Steps whose listed gaps are read at once: bounded memory."""
_NOT_NUMBER = bytes(c if chr(c) in "0123456789-" else 32 for c in range(256))


def _gaps_of(steps: pa.Table, rows: np.ndarray, origin: int) -> tuple[np.ndarray, np.ndarray]:
    """The listed longest gaps of these step rows (relative ns), in step order.

    gaps_longest_json is canonical JSON (sorted keys: end_ns, length_ns, start_ns; no other
    digits), so its numbers, read in order at C speed, are the gaps' fields three by three;
    end - start == length on every gap checks that reading (a million steps' lists parsed as
    JSON took seconds)."""
    col = steps["gaps_longest_json"]
    starts, ends = [], []
    for a in range(0, rows.size, GAPS_READ):
        text = "".join(col.take(pa.array(rows[a:a + GAPS_READ], pa.int64())).to_pylist()).encode()
        nums = np.array(text.translate(_NOT_NUMBER).split(), dtype=np.int64).reshape(-1, 3)
        end, length, start = nums[:, 0], nums[:, 1], nums[:, 2]
        if np.any(end - start != length):
            raise StallcaseError(None, "diagnosis steps table: gaps_longest_json is not canonical (end_ns, length_ns, start_ns)")
        starts.append(start)
        ends.append(end)
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(starts) - origin, np.concatenate(ends) - origin


def _host_tracks(inc: Incident, origin: int, lo: int, hi: int, add) -> None:
    for table, group, what in (("spans", "host", "host spans"), ("runtime_api", "host_api", "CUDA API")):
        observed, reason = source_status(inc, table)
        if not observed:
            add(0, lambda raw, table=table, group=group, what=what, reason=reason: _missing(f"{table}:none", group, what, reason))
            continue
        t = inc.table(table)
        rk, tid = _rank_key(t["rank"]), _i64(t["thread_id"])
        s, e = _rel(t, "start_ns", origin), _rel(t, "end_ns", origin)
        names = t["name"].to_numpy(zero_copy_only=False)
        extra_col = {"depth": _i64(t["depth"])} if table == "spans" else {"sync": _i64(t["is_sync"].cast(pa.int64()))}
        keys = np.unique(np.stack([rk, tid], axis=1), axis=0) if t.num_rows else np.zeros((0, 2), np.int64)
        if keys.shape[0] == 0:
            add(0, lambda raw, table=table, group=group, what=what: _empty(f"{table}:empty", group, what, "events"))
        for r, th in keys:
            sel = (rk == r) & (tid == th)
            add(int(sel.sum()), lambda raw, sel=sel, r=r, th=th, table=table, group=group, what=what, extra_col=extra_col,
                s=s, e=e, names=names: _with_rows(_interval_track(
                    f"{table}:{r}:{th}", group, f"{_rank_label(r)}{what} thread {th}", s[sel], e[sel], names[sel],
                    {k: v[sel] for k, v in extra_col.items()}, lo, hi, raw), extra_col.get("depth"), sel))


def _with_rows(track: dict, depth: np.ndarray | None, sel: np.ndarray) -> dict:
    """Host spans: one row per nesting level (capped), so a nested span never hides its parent."""
    if depth is not None:
        d = depth[sel]
        track["rows"] = int(min(int(d.max()) + 1 if d.size else 1, MAX_SPAN_ROWS))
    return track


def _gpu_tracks(inc: Incident, origin: int, lo: int, hi: int, add) -> None:
    observed, reason = source_status(inc, "kernels")
    if not observed:
        add(0, lambda raw: _missing("kernels:none", "gpu", "GPU kernels and busy time", reason))
        return
    k, m = inc.table("kernels"), inc.table("memcpy")
    k_rk, k_dev, k_str = _rank_key(k["rank"]), _i64(k["device"]), _i64(k["stream"])
    m_rk, m_dev = _rank_key(m["rank"]), _i64(m["device"])
    ks, ke = _rel(k, "start_ns", origin), _rel(k, "end_ns", origin)
    ms, me = _rel(m, "start_ns", origin), _rel(m, "end_ns", origin)
    k_names = k["name"].to_numpy(zero_copy_only=False)
    m_names, m_pageable = copy_labels(m)
    devs = sorted(set(zip(k_rk.tolist(), k_dev.tolist())) | set(zip(m_rk.tolist(), m_dev.tolist())))
    for r, d in devs:  # devices are few
        ksel = (k_rk == r) & (k_dev == d)
        msel = (m_rk == r) & (m_dev == d)
        bs, be = union(np.concatenate([ks[ksel], ms[msel]]), np.concatenate([ke[ksel], me[msel]]))
        add(int(bs.size), lambda raw, bs=bs, be=be, r=r, d=d: _interval_track(
            f"busy:{r}:{d}", "gpu", f"{_rank_label(r)}GPU {d} busy (all streams)", bs, be, None, None, lo, hi, raw, kind="busy"))
        for st in np.unique(k_str[ksel]):
            sel = ksel & (k_str == st)
            add(int(sel.sum()), lambda raw, sel=sel, r=r, d=d, st=st: _interval_track(
                f"kernels:{r}:{d}:{st}", "gpu", f"{_rank_label(r)}GPU {d} stream {st} kernels", ks[sel], ke[sel],
                k_names[sel], None, lo, hi, raw))
        # Copies by kind; those from/to pageable memory on a track of their own, marked: the
        # driver stages them through a bounce buffer while the host waits (pin_memory fixes it).
        for pageable, tid, what in ((False, "memcpy", "copies/memsets"),
                                    (True, "memcpy-pageable", "PAGEABLE copies (unpinned host memory: pin_memory=True)")):
            sel = msel & (m_pageable == pageable)
            if sel.any():
                add(int(sel.sum()), lambda raw, sel=sel, r=r, d=d, tid=tid, what=what: _interval_track(
                    f"{tid}:{r}:{d}", "gpu", f"{_rank_label(r)}GPU {d} {what}", ms[sel], me[sel], m_names[sel],
                    None, lo, hi, raw))


def copy_labels(m: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per memcpy row: its name on the timeline ("HtoD pageable->device async", "memset device
    sync"; memory kinds and the async flag where observed) and whether pageable memory is a side."""
    kind = m["kind"].to_numpy(zero_copy_only=False).astype(object)
    cols = [pc.fill_null(m[c].cast(pa.string()), "").to_numpy(zero_copy_only=False).astype(object)
            if c in m.column_names else np.full(m.num_rows, "", object) for c in ("src_kind", "dst_kind")]
    src, dst = cols
    asy = m["is_async"].to_pylist() if "is_async" in m.column_names else [None] * m.num_rows
    labels, seen = [], {}
    for key in zip(kind.tolist(), src.tolist(), dst.tolist(), asy):  # one label per distinct (kind, sides, async)
        if key not in seen:
            k, a, b, y = key
            sides = f"{a}->{b}" if a and b else (b or a)
            seen[key] = " ".join(x for x in (k, sides, None if y is None else ("async" if y else "sync")) if x)
        labels.append(seen[key])
    return np.asarray(labels, object), (src == "pageable") | (dst == "pageable")


def _nvml_tracks(inc: Incident, origin: int, lo: int, hi: int, add) -> None:
    observed, reason = source_status(inc, "nvml")
    t = inc.table("nvml")
    if not observed or t.num_rows == 0:
        for metric, label, _ in NVML_METRICS:
            add(0, lambda raw, metric=metric, label=label: _missing(f"nvml:{metric}:none", "nvml", label, reason) if not observed
                else _empty(f"nvml:{metric}:none", "nvml", label, "samples"))
        return
    rk, dev = _rank_key(t["rank"]), _i64(t["device"])
    metric = t["metric"].to_numpy(zero_copy_only=False).astype(str)
    ts = _rel(t, "ts_ns", origin)
    val = np.asarray(t["value"].to_numpy(zero_copy_only=False), dtype=np.float64)
    max_clock = val[metric == "max_sm_clock_mhz"]
    for r, d in sorted(set(zip(rk.tolist(), dev.tolist()))):
        for name, label, unit in NVML_METRICS:
            sel = (rk == r) & (dev == d) & (metric == name)
            tid, lab = f"nvml:{name}:{r}:{d}", f"{_rank_label(r)}GPU {d} {label}"
            if not sel.any():
                add(0, lambda raw, tid=tid, lab=lab, name=name: _empty(tid, "nvml", lab, f"'{name}' samples"))
                continue
            order = np.argsort(ts[sel], kind="stable")
            x, y = ts[sel][order], val[sel][order]
            top = 100.0 if unit == "%" else float(max(y.max(), max_clock.max() if max_clock.size else 0.0))

            def make(raw, x=x, y=y, tid=tid, lab=lab, unit=unit, top=top):
                tr = {"id": tid, "group": "nvml", "label": lab, "kind": "samples", "status": "observed",
                      "count": int(x.size), "unit": unit, "y_max": top}
                if raw:
                    tr.update(encoding="raw", ts=np.diff(x, prepend=0).tolist(), value=y.tolist())
                else:
                    mn, mx = minmax(x, y, lo, hi, BUCKETS)
                    tr.update(encoding="buckets", buckets=BUCKETS, min=_b64(mn.astype(np.float32)), max=_b64(mx.astype(np.float32)))
                return tr

            add(int(x.size), make)


def _collective_tracks(inc: Incident, origin: int, lo: int, hi: int, add) -> None:
    """Per rank: each collective from GPU start to end, with its wait shaded.

    Wait is the time a rank spent in a collective before the last rank of the group
    arrived (max gpu_start_ns over ranks with the same pg_id and seq_id): the part a
    faster rank could not use, the sawtooth on the ranks that arrive early. Collectives
    recorded without GPU start/end (the NCCL flight recorder: its discovered times are the
    watchdog's, not the GPU's) are drawn at their host enqueue time as instants, with their
    GPU duration in the tooltip: where the GPU ran them is not in the record.
    """
    observed, reason = source_status(inc, "collectives")
    t = inc.table("collectives")
    if not observed or t.num_rows == 0:
        add(0, lambda raw: _missing("collectives:none", "collectives", "collectives", reason) if not observed
            else _empty("collectives:none", "collectives", "collectives", "collectives"))
        return
    timed_mask = pc.and_(pc.is_valid(t["gpu_start_ns"]), pc.is_valid(t["gpu_end_ns"]))
    timed, untimed = t.filter(timed_mask), t.filter(pc.invert(timed_mask))
    untimed = untimed.filter(pc.is_valid(untimed["enqueue_ns"]))
    if timed.num_rows == 0 and untimed.num_rows == 0:
        add(0, lambda raw: _empty("collectives:untimed", "collectives", "collectives", "collectives with GPU or enqueue times"))
        return
    if timed.num_rows:
        last = timed.group_by(["pg_id", "seq_id"]).aggregate([("gpu_start_ns", "max")])
        joined = timed.join(last, keys=["pg_id", "seq_id"])
        s, e = _rel(joined, "gpu_start_ns", origin), _rel(joined, "gpu_end_ns", origin)
        wait = np.clip(_i64(joined["gpu_start_ns_max"]) - origin - s, 0, e - s)
        rk, names, seq = _i64(joined["rank"]), joined["op_type"].to_numpy(zero_copy_only=False), _i64(joined["seq_id"])
        for r in np.unique(rk):
            sel = rk == r
            add(int(sel.sum()), lambda raw, sel=sel, r=r: _interval_track(
                f"collectives:{r}", "collectives", f"rank {r} collectives", s[sel], e[sel], names[sel],
                {"wait": wait[sel], "seq_id": seq[sel]}, lo, hi, raw, kind="collectives"))
    if untimed.num_rows:
        q = _rel(untimed, "enqueue_ns", origin)
        dur = untimed["gpu_duration_ns"].cast(pa.float64()).fill_null(float("nan")).to_numpy(zero_copy_only=False) \
            if "gpu_duration_ns" in untimed.column_names else np.full(untimed.num_rows, np.nan)
        rk, names, seq = _i64(untimed["rank"]), untimed["op_type"].to_numpy(zero_copy_only=False), _i64(untimed["seq_id"])
        for r in np.unique(rk):
            sel = rk == r
            add(int(sel.sum()), lambda raw, sel=sel, r=r: _interval_track(
                f"collectives_enqueued:{r}", "collectives", f"rank {r} collectives (enqueue only)",
                q[sel], q[sel], names[sel], {"seq_id": seq[sel], "gpu_dur": np.where(np.isnan(dur[sel]), -1, dur[sel]).astype(np.int64)},
                lo, hi, raw, kind="enqueued"))
