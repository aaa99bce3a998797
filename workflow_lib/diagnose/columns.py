"""One rank's diagnosis as columns: every step at once (diagnose/batch.py), no dict per step.

`diagnose_rank` gives, for the rank's steps, what the per-step path gives in its step records
(the measures, the gaps, each check's verdict, explains_ns and missing evidence, the excess
over the typical step and each finding's share of it), as arrays. Evidence (free-form per
check) is kept in full only for the steps a reader looks at first: the warm-up steps, the
slow steps (summary.slow_steps) and the steps whose collective wait was matched across ranks;
those steps are made by the per-step path itself (`detail`), so their records are exactly
what the per-step path writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import batch, excess as excess_mod, measures
from .checks import CHECKS, NAMES
from .types import FINDING_VERDICTS

_I64 = np.int64


@dataclass
class RankColumns:
    rank: int | None
    frame: batch.StepFrame
    origin_ns: int
    measures: dict  # name -> int64 array, or None where its source was not observed
    kernels_observed: bool  # overlap_factor is kernel_sum / busy where kernels were observed
    gaps_count: np.ndarray
    gaps_total_ns: np.ndarray
    gaps_longest: "Longest"
    verdict: np.ndarray  # (steps, checks) int8 into FINDING_VERDICTS, checks in NAMES order
    explains_ns: np.ndarray  # (steps, checks) int64
    missing: list  # per check: its distinct missing tuples
    missing_code: np.ndarray  # (steps, checks) int32 into missing[check]
    explained_ns: np.ndarray
    excess: dict = field(default_factory=dict)  # excess_mod.attach_columns' result
    detail: dict = field(default_factory=dict)  # step index -> the per-step path's record
    kinds_ns: dict = field(default_factory=dict)  # step index -> transfer_stall {kind: critical ns}
    spans_ns: list = field(default_factory=list)  # per check: its evidence "spans" summed over attributed steps

    @property
    def unexplained_ns(self) -> np.ndarray:
        return self.frame.wall - self.explained_ns


@dataclass(frozen=True)
class Longest:
    """Each step's longest gaps (measures.gap_records), flat: step k's are rows
    offsets[k]:offsets[k+1], longest first, on the absolute timeline."""

    offsets: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    length_ns: np.ndarray

    def of(self, k: int) -> list[dict]:
        a, b = int(self.offsets[k]), int(self.offsets[k + 1])
        return [{"start_ns": int(s), "end_ns": int(e), "length_ns": int(n)}
                for s, e, n in zip(self.start_ns[a:b], self.end_ns[a:b], self.length_ns[a:b])]


def _gaps(frame: batch.StepFrame, base: batch.StepsBase, observed: bool, origin: int, limit: int):
    n = frame.n
    if not observed:
        z = np.zeros(0, _I64)
        return np.zeros(n, _I64), np.zeros(n, _I64), Longest(np.zeros(n + 1, _I64), z, z, z)
    g, k = base.idle, base.idle_step
    length = g.end_ns - g.start_ns
    count = np.bincount(k, minlength=n)[:n].astype(_I64)
    total = np.bincount(k, weights=length, minlength=n)[:n].astype(_I64)
    # The `limit` longest per step, longest first, ties in time order (measures.gap_records).
    order = np.lexsort((np.arange(k.size), -length, k))
    ks = k[order]
    first = np.searchsorted(ks, np.arange(n), side="left")
    top = order[(np.arange(ks.size) - first[ks]) < limit]  # grouped by step, longest first within
    offsets = np.concatenate([[0], np.cumsum(np.minimum(count, limit))]).astype(_I64)
    return count, total, Longest(offsets, g.start_ns[top] + origin, g.end_ns[top] + origin, length[top])


def diagnose_rank(ev, frame: batch.StepFrame, src, opts, m: dict, cold: list, origin: int,
                  coll: dict | None, step_record) -> RankColumns:
    """All checks over all of the rank's steps; `m` the per-step measures (_step_measures),
    `coll` (rank, step_id) -> matched collective finding, `step_record(k)` the per-step path's
    record of step index k (for the steps kept in detail)."""
    base = batch.make_base(frame, ev, opts.min_gap_ns)
    si = batch.StepsInput(frame, base, ev, src, opts, cold)
    cnt, tot, longest = _gaps(frame, base, src.kernels, origin, opts.max_gaps_listed)
    n, nc = frame.n, len(CHECKS)
    verdict = np.zeros((n, nc), np.int8)
    missing_code = np.zeros((n, nc), np.int32)
    explains = np.zeros((n, nc), _I64)
    missing, spans, kinds = [], [], {}
    credit = batch.Resolver(frame)
    for j, c in enumerate(CHECKS):  # resolved as they come: one check's claim held at a time
        f = c.check_steps(si) if hasattr(c, "check_steps") else batch.per_step(c, si, ev.rank)
        explains[:, j] = credit.credit(f.claimed)
        verdict[:, j], missing_code[:, j] = f.verdict, f.missing_code
        missing.append(f.missing)
        spans.append(f.spans_ns)
        kinds.update(f.kinds_ns)
        del f
    cold_rows = np.flatnonzero(si.is_cold).tolist()
    del si, base
    cols = RankColumns(ev.rank, frame, origin, m, src.kernels, cnt, tot, longest, verdict, explains, missing,
                       missing_code, credit.explained(), kinds_ns=kinds, spans_ns=spans)
    del credit
    # Steps whose collective wait was matched across ranks: the per-step path credits that
    # wait first (diagnose._collective_claim); they are made there and their rows replaced.
    if coll:
        for k in np.flatnonzero([(ev.rank, int(i)) in coll for i in frame.ids]).tolist():
            _take_record(cols, k, step_record(k))
    cols.excess = excess_mod.attach_columns(frame.wall, cols.explains_ns, opts)
    slow = excess_mod.slow_rows(cols.excess, frame.wall, opts.slow_step_factor, frame.ids)
    for k in sorted((set(cold_rows) | set(slow.tolist())) - set(cols.detail)):
        _take_record(cols, k, step_record(k))
    for k, rec in cols.detail.items():
        excess_mod.fill_record(rec, cols.excess, k)
    return cols


def _take_record(cols: RankColumns, k: int, rec: dict) -> None:
    """Step k as the per-step path made it (its findings in NAMES order)."""
    cols.detail[k] = rec
    for j, f in enumerate(rec["findings"]):
        cols.verdict[k, j] = FINDING_VERDICTS.index(f["verdict"])
        cols.explains_ns[k, j] = f["explains_ns"]
        ms = cols.missing[j]
        t = tuple(f["missing"])
        if t not in ms:
            ms.append(t)
        cols.missing_code[k, j] = ms.index(t)
        if f["check"] == "transfer_stall" and f["verdict"] == "attributed":
            cols.kinds_ns[k] = {kind: int(b.get("critical_ns", 0)) for kind, b in f["evidence"].get("by_kind", {}).items()}
    cols.explained_ns[k] = rec["explained_ns"]


def step_dict(cols: RankColumns, k: int) -> dict:
    """Step k as a step record; the evidence is the per-step path's where kept, else None."""
    if k in cols.detail:
        return cols.detail[k]
    fr = cols.frame
    rec = {name: (None if v is None else int(v[k])) for name, v in cols.measures.items()}
    of = measures.overlap_factor(rec["kernel_sum_ns"], rec["busy_ns"]) if cols.kernels_observed else None
    rec.update(step_id=int(fr.ids[k]), rank=cols.rank, thread_id=int(fr.tids[k]),
               start_ns=int(fr.starts[k] + cols.origin_ns), end_ns=int(fr.ends[k] + cols.origin_ns), overlap_factor=of,
               gaps={"count": int(cols.gaps_count[k]), "total_ns": int(cols.gaps_total_ns[k]),
                     "longest": cols.gaps_longest.of(k)},
               findings=[{"check": name, "verdict": FINDING_VERDICTS[int(cols.verdict[k, j])],
                          "explains_ns": int(cols.explains_ns[k, j]), "evidence": None,
                          "missing": list(cols.missing[j][int(cols.missing_code[k, j])])} for j, name in enumerate(NAMES)],
               explained_ns=int(cols.explained_ns[k]), unexplained_ns=int(fr.wall[k] - cols.explained_ns[k]))
    excess_mod.fill_record(rec, cols.excess, k)
    return rec


# What the summary, the next experiments and the job summary add up over a rank's steps, from
# the columns (diagnose.step_totals, next_experiments.totals and job.rank_digest over records).

def step_totals(cols: RankColumns, into: dict | None) -> dict:
    from . import step_totals as record_totals, warmup

    t = record_totals([], into)
    cold = [cols.detail[k] for k in sorted(cols.detail)
            if cols.verdict[k, NAMES.index("warm_up")] == batch.ATTRIBUTED]
    t["warm_up"] = warmup.totals(cold, t["warm_up"])
    for j, name in enumerate(NAMES):
        b = t["by_check"][name]
        counts = np.bincount(cols.verdict[:, j], minlength=len(FINDING_VERDICTS))
        for v, word in enumerate(FINDING_VERDICTS):
            b[f"{word}_steps"] += int(counts[v])
        b["explains_ns"] += int(cols.explains_ns[:, j].sum())
    t["steps"] += cols.frame.n
    t["wall_ns"] += int(cols.frame.wall.sum())
    t["explained_ns"] += int(cols.explained_ns.sum())
    t["unexplained_ns"] += int(cols.unexplained_ns.sum())
    return t


def experiments(cols: RankColumns, acc: dict) -> dict:
    from .next_experiments import CANDIDATES

    steady = cols.verdict[:, NAMES.index("warm_up")] != batch.ATTRIBUTED
    acc["steady"] += int(steady.sum())
    for j, name in enumerate(NAMES):
        if name not in CANDIDATES:
            continue
        hit = steady & (cols.verdict[:, j] == batch.ATTRIBUTED) & (cols.explains_ns[:, j] > 0)
        if not hit.any():
            continue
        t = acc["checks"].setdefault(name, {"ns": 0, "steps": 0})
        t["ns"] += int(cols.explains_ns[hit, j].sum())
        t["steps"] += int(hit.sum())
        if name == "transfer_stall":
            for k in np.flatnonzero(hit).tolist():
                for kind, ns in cols.kinds_ns.get(k, {}).items():
                    acc["kinds"][kind] = acc["kinds"].get(kind, 0) + ns
    return acc


def rank_digest(cols: RankColumns) -> dict | None:
    """job.rank_digest from columns (the span names behind the top cause: its checks' evidence
    "spans" summed over its attributed steps, StepFindings.spans_ns)."""
    from .job import MAX_LINKED_SPANS

    if cols.rank is None:
        return None
    ids = cols.frame.ids
    last = np.zeros(ids.size, bool)
    _, first_rev = np.unique(ids[::-1], return_index=True)
    last[ids.size - 1 - first_rev] = True  # the last row of each step id, as job.rank_digest keeps
    att = (cols.verdict == batch.ATTRIBUTED) & (cols.explains_ns != 0) & last[:, None]
    totals = {name: int(cols.explains_ns[att[:, j], j].sum()) for j, name in enumerate(NAMES) if att[:, j].any()}
    own = {k: v for k, v in totals.items() if k != "collective_wait"}
    top = max(sorted(own), key=own.get) if own else None
    names = cols.spans_ns[NAMES.index(top)] if top else {}
    walls = {int(s): int(w) for s, w in zip(ids[last].tolist(), cols.frame.wall[last].tolist())}
    return {"rank": cols.rank, "walls": walls, "cause": {"check": top, "explains_ns": totals.get(top, 0) if top else 0},
            "spans": [n for n, _ in sorted(names.items(), key=lambda kv: -kv[1])[:MAX_LINKED_SPANS]],
            "wait_ns": totals.get("collective_wait", 0)}


# The two tables of step_tables.py straight from the columns: no dict per step. Text columns
# (the longest gaps, the excess) are canonical JSON as step_tables.canonical writes them; the
# evidence is kept for the steps in `detail` only (null elsewhere).

def _longest_json(lg: Longest, lo: int, hi: int) -> list[str]:
    a, b = int(lg.offsets[lo]), int(lg.offsets[hi])
    one = [f'{{"end_ns":{e},"length_ns":{g},"start_ns":{s}}}'
           for s, e, g in zip(lg.start_ns[a:b].tolist(), lg.end_ns[a:b].tolist(), lg.length_ns[a:b].tolist())]
    off = (lg.offsets[lo:hi + 1] - a).tolist()
    return ["[" + ",".join(one[off[k]:off[k + 1]]) + "]" for k in range(hi - lo)]


def _excess_json(ex: dict, lo: int, hi: int) -> list:
    if not ex:
        return [None] * (hi - lo)
    exc, une, inc = ex["excess_ns"][lo:hi].tolist(), ex["unexplained_ns"][lo:hi].tolist(), ex["in_comp"][lo:hi].tolist()
    typical = ex["typical_ns"]
    keys = [f'"{c}":' for c in ex["causes"]]
    out = []
    for k, row in enumerate(ex["by_cause"][lo:hi].tolist()):  # one short string per step (plain Python: no NumPy call each)
        if not inc[k]:
            out.append(None)
            continue
        parts = ",".join(key + str(v) for key, v in zip(keys, row) if v > 0)
        out.append(f'{{"by_cause":{{{parts}}},"excess_ns":{exc[k]},"typical_ns":{typical},"unexplained_ns":{une[k]}}}')
    return out


# Steps per pair of tables: a row group each, so the findings' Arrow columns (14 rows a step)
# are held for this many steps at a time, not for all of a rank's.
CHUNK_STEPS = 1 << 17


def tables(cols: RankColumns):
    """(steps table, findings table) pairs of step_tables.py for the rank's steps, CHUNK_STEPS
    steps at a time (findings' step_row relative to their chunk)."""
    import pyarrow as pa

    from . import step_tables as st

    n, nc = cols.frame.n, len(NAMES)
    # The `missing` texts: one dictionary for the rank, each check's codes mapped into it.
    texts: list[str] = []
    code_of: list[np.ndarray] = []
    for j in range(nc):
        local = []
        for t in cols.missing[j]:
            s = st.canonical(list(t))
            if s not in texts:
                texts.append(s)
            local.append(texts.index(s))
        code_of.append(np.asarray(local, np.int32))
    texts_arr = pa.array(texts, pa.string())
    for lo in range(0, max(n, 1), CHUNK_STEPS):
        yield _chunk(cols, lo, min(lo + CHUNK_STEPS, n), code_of, texts_arr)


def _chunk(cols: RankColumns, lo: int, hi: int, code_of: list, texts):
    import pyarrow as pa

    from . import step_tables as st

    fr, n, nc = cols.frame, hi - lo, len(NAMES)
    i64, f64 = pa.int64(), pa.float64()

    def ints(v):
        return pa.nulls(n, i64) if v is None else pa.array(np.asarray(v[lo:hi], _I64), i64)

    m = cols.measures
    of = pa.nulls(n, f64)
    if cols.kernels_observed:
        of = pa.array([measures.overlap_factor(a, b) for a, b in zip(m["kernel_sum_ns"][lo:hi].tolist(), m["busy_ns"][lo:hi].tolist())], f64)
    data = {
        "step_id": ints(fr.ids), "rank": pa.nulls(n, i64) if cols.rank is None else pa.array(np.full(n, cols.rank, _I64), i64),
        "thread_id": ints(fr.tids), "start_ns": ints(fr.starts + cols.origin_ns), "end_ns": ints(fr.ends + cols.origin_ns),
        "wall_ns": ints(fr.wall), **{k: ints(m[k]) for k in ("kernel_sum_ns", "busy_ns", "idle_ns", "host_api_ns", "host_sync_api_ns")},
        "overlap_factor": of, "gaps_count": ints(cols.gaps_count), "gaps_total_ns": ints(cols.gaps_total_ns),
        "gaps_longest_json": pa.array(_longest_json(cols.gaps_longest, lo, hi), pa.string()),
        "explained_ns": ints(cols.explained_ns), "unexplained_ns": ints(cols.unexplained_ns),
        "excess_json": pa.array(_excess_json(cols.excess, lo, hi), pa.string()),
    }
    steps_tbl = pa.Table.from_arrays([data[f.name] for f in st.STEPS_SCHEMA], schema=st.STEPS_SCHEMA)
    # Findings: one row per (step, check), checks in NAMES order.
    codes = cols.missing_code[lo:hi]
    missing = np.stack([code_of[j][codes[:, j]] for j in range(nc)], axis=1).ravel() if n else np.zeros(0, np.int32)
    share = cols.excess["share"][lo:hi].ravel() if cols.excess else np.full(n * nc, np.nan)
    ev_idx = np.full(n * nc, -1, np.int64)
    ev_text: list[str] = []
    for k in sorted(k for k in cols.detail if lo <= k < hi):
        for j, f in enumerate(cols.detail[k]["findings"]):
            ev_idx[(k - lo) * nc + j] = len(ev_text)
            ev_text.append(st.canonical(f["evidence"]))
    evidence = pa.DictionaryArray.from_arrays(pa.array(ev_idx, i64, mask=ev_idx < 0), pa.array(ev_text, pa.string())).cast(pa.string())
    findings_tbl = pa.Table.from_arrays([
        pa.array(np.repeat(np.arange(n, dtype=_I64), nc), i64),
        pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(nc, dtype=np.int8), n), pa.int8()), pa.array(list(NAMES))),
        pa.DictionaryArray.from_arrays(pa.array(cols.verdict[lo:hi].ravel().astype(np.int8), pa.int8()), pa.array(list(FINDING_VERDICTS))),
        pa.array(cols.explains_ns[lo:hi].ravel(), i64),
        pa.array(share, f64, mask=np.isnan(share)),
        pa.DictionaryArray.from_arrays(pa.array(missing.astype(np.int32), pa.int32()), texts),
        evidence,
    ], schema=st.FINDINGS_SCHEMA)
    return steps_tbl, findings_tbl
