"""One rank's diagnosis as columns: every step at once (diagnose/batch.py), no dict per step.

`diagnose_rank` gives, for all of the rank's steps, the measures, the gaps, each check's
verdict, explains_ns and missing evidence, the excess over the typical step and each
finding's share of it, as arrays: warm-up steps, slow steps and steps whose collective wait
was matched across ranks included. Evidence (free-form per check, describe.py) is kept for
every step of a diagnosis of up to EVIDENCE_ALL_UP_TO steps, else for the steps a reader
looks at first (warm-up, slow, matched collective); those steps' records are in `detail`.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import batch, describe, excess as excess_mod, fast, lead, measures, places
from . import step_tables as st
from .credit import Resolver
from .evidence import RankInput
from .job import MAX_LINKED_SPANS
from .next_experiments import CANDIDATES
from .record import empty_totals
from .checks import CHECKS, FIRST_AFTER, NAMES, collective_wait
from .checks import warm_up as warmup
from .types import FINDING_VERDICTS, Intervals

_I64 = np.int64
J_FIRST = NAMES.index(FIRST_AFTER)
# The checks whose findings may claim time ahead of the rest (types.Finding.first).
FIRST_CLAIMS = (NAMES.index("kernel_slowdown"),)


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
    detail: dict = field(default_factory=dict)  # step index -> its step record, evidence kept
    kinds_ns: dict = field(default_factory=dict)  # step index -> transfer_stall {kind: critical ns}
    spans_ns: list = field(default_factory=list)  # per check: its evidence "spans" summed over attributed steps
    # Steps outside every window in which CUPTI was armed (capture/gpu_arming.py): their GPU
    # measures are "not observed" (None), never an idle GPU. None when every step shares the rank's sources.
    gpu_unrecorded: np.ndarray | None = None
    lead_owed: np.ndarray | None = None  # per step: diagnose/lead.py's owed lead (sync_stall's refill bound)
    at: dict = field(default_factory=dict)  # check index -> places.Placed: where its attributed findings sit

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


# The per-step measures that need GPU activity recorded during the step (record.step_measures).
GPU_MEASURES = frozenset({"kernel_sum_ns", "busy_ns", "idle_ns", "host_api_ns", "host_sync_api_ns"})


def _gaps(n: int, g, k: np.ndarray, observed: bool, origin: int, limit: int):
    """Per step: its GPU idle gaps' count, total and `limit` longest, from the idle pieces `g`
    and the step index `k` of each (the pieces of one step in time order)."""
    if not observed:
        z = np.zeros(0, _I64)
        return np.zeros(n, _I64), np.zeros(n, _I64), Longest(np.zeros(n + 1, _I64), z, z, z)
    length = g.end_ns - g.start_ns
    count = np.bincount(k, minlength=n)[:n].astype(_I64)
    total = np.bincount(k, weights=length, minlength=n)[:n].astype(_I64)
    # The `limit` longest per step, longest first, ties in time order (measures.gap_records).
    order = np.lexsort((np.arange(k.size), -length, k))
    ks = k[order]
    first = fast.searchsorted(ks, np.arange(n), side="left")
    top = order[(np.arange(ks.size) - first[ks]) < limit]  # grouped by step, longest first within
    offsets = np.concatenate([[0], np.cumsum(np.minimum(count, limit))]).astype(_I64)
    return count, total, Longest(offsets, g.start_ns[top] + origin, g.end_ns[top] + origin, length[top])


# A diagnosis of up to this many steps keeps every step's evidence; above it, the evidence of
# the steps a reader opens first (warm-up, slow, and those whose collective wait was matched
# across ranks). Evidence is free-form per check and made step by step (checks' `describe`):
# ~0.5 ms a step, 1 s at 2,000 steps (docs/benchmarks.md, issue 26); verdicts, credit and
# the tables are made for all steps at once whatever the size.
EVIDENCE_ALL_UP_TO = 2_000


def disjoint_groups(starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray]:
    """The rank's steps (indices) in groups whose steps never overlap, each in time order: one
    group unless steps overlap (nested steps, two threads' steps at once). Greedy interval
    partitioning: each step joins the first group whose last step ended by its start."""
    order = np.argsort(starts, kind="stable")
    if batch.StepFrame.disjoint(starts[order], ends[order]):
        return [order]
    groups: list[list[int]] = []
    last: list[int] = []
    for i in order.tolist():  # only for overlapping steps: groups are few
        for g, end in enumerate(last):
            if starts[i] >= end:
                groups[g].append(i)
                last[g] = int(ends[i])
                break
        else:
            groups.append([i])
            last.append(int(ends[i]))
    return [np.asarray(g, _I64) for g in groups]


class _Missing:
    """Per check, the distinct missing-evidence tuples of a rank (code 0 is ())."""

    def __init__(self, nc: int):
        self.lists = [[()] for _ in range(nc)]
        self._at = [{(): 0} for _ in range(nc)]

    def codes(self, j: int, tuples: list) -> np.ndarray:
        at, lst = self._at[j], self.lists[j]
        out = []
        for t in tuples:
            t = tuple(t)
            if t not in at:
                at[t] = len(lst)
                lst.append(t)
            out.append(at[t])
        return np.asarray(out, np.int32)


def _source_groups(groups: list[np.ndarray], covered: np.ndarray | None, src, src_off):
    """Each group of steps with the sources it is read with: with GPU activity recorded in
    windows, a group splits into its steps inside a window (the rank's sources) and those
    outside (no kernels, no runtime calls); a part of a group is still disjoint."""
    for g in groups:
        if covered is None:
            yield g, src
            continue
        inside = covered[g]
        if inside.any():
            yield g[inside], src
        if not inside.all():
            yield g[~inside], src_off


def diagnose_rank(ev, frame: batch.StepFrame, src, opts, m: dict, cold: list, origin: int,
                  coll: dict | None, keep_all: bool, covered: np.ndarray | None = None) -> RankColumns:
    """All checks over all of the rank's steps (`frame` in the steps table's order, overlapping
    or not); `m` the per-step measures, `cold` warmup.cold_steps, `coll` (rank, step_id) ->
    the collectives analysis' finding for the steps it matched. Evidence for every step when
    `keep_all`, else for the warm-up, slow and matched steps."""
    n, nc = frame.n, len(CHECKS)
    jc = NAMES.index("collective_wait")
    verdict = np.zeros((n, nc), np.int8)
    missing_code = np.zeros((n, nc), np.int32)
    explains = np.zeros((n, nc), _I64)
    explained = np.zeros(n, _I64)
    missing = _Missing(nc)
    spans: list[dict] = [{} for _ in range(nc)]
    kinds: dict = {}
    idle_parts: list = []
    placed_parts: dict[int, list] = {NAMES.index(c): [] for c in places.PLACED}
    matched_rows: list[np.ndarray] = []
    src_off = (dataclasses.replace(src, kernels=False, runtime_api=False, gpu_outside_window=True)
               if covered is not None else src)
    owed = lead.owed_of_steps(ev, frame.starts, frame.ends, opts.warmup_steps, covered)
    for g, g_src in _source_groups(disjoint_groups(frame.starts, frame.ends), covered, src, src_off):
        if g.size == n and bool(np.all(g == np.arange(n))):
            # The usual case: one group, the table's order. Slices, not copies and scatters.
            fr, g, g_cold = frame, slice(None), cold
        else:
            fr = batch.StepFrame(frame.ids[g], frame.tids[g], frame.starts[g], frame.ends[g])
            g_cold = [cold[i] for i in g.tolist()]
        base = batch.make_base(fr, ev, opts.min_gap_ns)
        si = batch.StepsInput(fr, base, RankInput(ev, g_src, opts), g_cold, owed[g])
        rows_of = (lambda k: k) if isinstance(g, slice) else (lambda k, g=g: g[k])  # frame rows of group rows
        if g_src.kernels:  # a step read without GPU evidence has no GPU gaps to list
            idle_parts.append((base.idle, rows_of(base.idle_step)))
        credit = Resolver(fr)
        # A wait matched across ranks by communicator and sequence number names the cause of
        # the time a sync or a busy GPU also shows: it is credited first (collective_wait.matched).
        matched = collective_wait.matched(si, coll)
        if matched is not None:
            explains[g, jc] = credit.credit(matched.claims.claimed)
            matched_rows.append(rows_of(matched.rows))
        early: dict = {}  # check index -> (its findings, what its `first` claims were credited)
        for j, c in enumerate(CHECKS):  # resolved as they come: one check's claim held at a time
            f, first_ns = early.pop(j) if j in early else (c.check_steps(si), 0)
            if j == jc and matched is not None:
                f = matched.over(f)
            else:
                explains[g, j] = credit.credit(f.claimed) + first_ns
            if j == J_FIRST:  # claims credited ahead of the rest (checks.FIRST_AFTER): read those checks now
                for k in FIRST_CLAIMS:
                    fk = CHECKS[k].check_steps(si)
                    early[k] = (fk, credit.credit(fk.first) if fk.first is not None else 0)
            verdict[g, j] = f.verdict
            missing_code[g, j] = missing.codes(j, f.missing)[f.missing_code] if f.missing_code is not None else 0
            for name, ns in f.spans_ns.items():
                spans[j][name] = spans[j].get(name, 0) + ns
            kinds.update({int(rows_of(k)): v for k, v in f.kinds_ns.items()})
            del f
        explained[g] = credit.explained()
        for j, parts in placed_parts.items():  # where the attributed findings of the placed checks sit
            p, k = fr.split(places.union_of(NAMES[j], ev))
            keep = verdict[rows_of(k), j] == batch.ATTRIBUTED
            parts.append((batch._iv(p.start_ns[keep], p.end_ns[keep]), rows_of(k[keep])))
        if matched is not None and matched.unplaced.size:
            # A wait with no NCCL kernels or host span to place it on: credited last, with
            # time no other check explained.
            rows = rows_of(matched.unplaced)
            extra = np.minimum(matched.unplaced_ns, frame.wall[rows] - explained[rows])
            explains[rows, jc] += extra
            explained[rows] += extra
        del si, base, credit
    none = np.zeros(0, _I64)
    idle = Intervals(np.concatenate([none] + [p.start_ns for p, _ in idle_parts]), np.concatenate([none] + [p.end_ns for p, _ in idle_parts]))
    cnt, tot, longest = _gaps(n, idle, np.concatenate([none] + [np.asarray(k, _I64) for _, k in idle_parts]), src.kernels, origin, opts.max_gaps_listed)
    cols = RankColumns(ev.rank, frame, origin, m, src.kernels, cnt, tot, longest, verdict, explains, missing.lists,
                       missing_code, explained, kinds_ns=kinds, spans_ns=spans, lead_owed=owed)
    if covered is not None:
        cols.gpu_unrecorded = ~covered
    cols.at = {j: places.Placed.of_rank(parts, n, origin) for j, parts in placed_parts.items()}
    cols.excess = excess_mod.attach_columns(frame.wall, cols.explains_ns, opts)
    if keep_all:
        kept = range(n)
    else:
        slow = excess_mod.slow_rows(cols.excess, frame.wall, opts.slow_step_factor, frame.ids)
        cold_rows = [i for i, c in enumerate(cold[:opts.warmup_steps]) if c is not None]  # only the first steps can be cold
        kept = sorted(set(cold_rows) | set(slow.tolist()) | set(np.concatenate(matched_rows or [np.zeros(0, _I64)]).tolist()))
    for k in kept:
        k_src = src_off if covered is not None and not covered[k] else src
        cols.detail[k] = step_dict(cols, k, describe.evidence(ev, k_src, opts, cols, k, cold[k], origin, coll))
    return cols


def step_dict(cols: RankColumns, k: int, evidence: list | None = None) -> dict:
    """Step k as a step record: its evidence (per check, NAMES order) where kept, else None."""
    if evidence is None and k in cols.detail:
        return cols.detail[k]
    fr = cols.frame
    off = cols.gpu_unrecorded is not None and bool(cols.gpu_unrecorded[k])
    rec = {name: (None if v is None or (off and name in GPU_MEASURES) else int(v[k])) for name, v in cols.measures.items()}
    of = measures.overlap_factor(rec["kernel_sum_ns"], rec["busy_ns"]) if cols.kernels_observed and not off else None
    rec.update(step_id=int(fr.ids[k]), rank=cols.rank, thread_id=int(fr.tids[k]),
               start_ns=int(fr.starts[k] + cols.origin_ns), end_ns=int(fr.ends[k] + cols.origin_ns), overlap_factor=of,
               gaps={"count": int(cols.gaps_count[k]), "total_ns": int(cols.gaps_total_ns[k]),
                     "longest": cols.gaps_longest.of(k)},
               findings=[{"check": name, "verdict": FINDING_VERDICTS[int(cols.verdict[k, j])],
                          "explains_ns": int(cols.explains_ns[k, j]), "evidence": None if evidence is None else evidence[j],
                          "missing": list(cols.missing[j][int(cols.missing_code[k, j])]),
                          "at": cols.at[j].of(k) if j in cols.at else None} for j, name in enumerate(NAMES)],
               explained_ns=int(cols.explained_ns[k]), unexplained_ns=int(fr.wall[k] - cols.explained_ns[k]))
    excess_mod.fill_record(rec, cols.excess, k)
    return rec


# What the summary, the next experiments and the job summary add up over a rank's steps, from
# the columns (what the summary, the next experiments and the job summary read: record.Sums).

def step_totals(cols: RankColumns, into: dict | None) -> dict:
    t = into if into is not None else empty_totals()
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
    """What the job summary needs from one rank (job.summary_of) (the span names behind the top cause: its checks' evidence
    "spans" summed over its attributed steps, StepFindings.spans_ns)."""
    if cols.rank is None:
        return None
    ids = cols.frame.ids
    last = np.zeros(ids.size, bool)
    _, first_rev = np.unique(ids[::-1], return_index=True)
    last[ids.size - 1 - first_rev] = True  # the last row of each step id
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

def _longest_json(lg: Longest, lo: int, hi: int) -> pa.Array:
    a, b = int(lg.offsets[lo]), int(lg.offsets[hi])
    return fast.gaps_json(lg.start_ns[a:b], lg.end_ns[a:b], lg.length_ns[a:b], lg.offsets[lo:hi + 1] - a)


def _excess_json(ex: dict, lo: int, hi: int) -> list:
    if not ex:
        return [None] * (hi - lo)
    exc, une, inc = ex["excess_ns"][lo:hi].tolist(), ex["unexplained_ns"][lo:hi].tolist(), ex["in_comp"][lo:hi].tolist()
    typical = ex["typical_ns"]
    keys = [f'"{c}":' for c in ex["causes"]]
    # by_cause's text only for the steps with a growth (most steps have none: joining a step's
    # dozen zero causes was 1.3 s of a 1M-step diagnosis); "" for the others.
    by = ex["by_cause"][lo:hi]
    parts = [""] * (hi - lo)
    rows = np.flatnonzero((by > 0).any(axis=1))
    for k, row in zip(rows.tolist(), by[rows].tolist()):
        parts[k] = ",".join(key + str(v) for key, v in zip(keys, row) if v > 0)
    # one short string per step (plain Python: no NumPy call each)
    return [f'{{"by_cause":{{{p}}},"excess_ns":{x},"typical_ns":{typical},"unexplained_ns":{u}}}' if i else None
            for p, x, u, i in zip(parts, exc, une, inc)]


# Steps per pair of tables: a row group each, so the findings' Arrow columns (14 rows a step)
# are held for this many steps at a time, not for all of a rank's.
CHUNK_STEPS = 1 << 17


def tables(cols: RankColumns):
    """(steps table, findings table) pairs of step_tables.py for the rank's steps, CHUNK_STEPS
    steps at a time (findings' step_row relative to their chunk)."""
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


def _in_use(codes: np.ndarray, values: pa.Array, index_type) -> pa.DictionaryArray:
    """The column of `codes` into `values` with only the values it uses, in order of first use:
    what step_tables.py writes from step records, so a table's bytes do not depend on which path
    wrote it. NumPy over the codes (one pass per value: a dictionary here holds a few values),
    not Arrow's cast to text and encode again, which made a string per row (1.7 s of a
    1M-step diagnosis)."""
    codes = np.asarray(codes)
    hit = np.bincount(codes, minlength=len(values)) if codes.size else np.zeros(len(values), np.int64)
    used = np.flatnonzero(hit)
    first = np.array([int(np.argmax(codes == v)) for v in used.tolist()], np.int64)
    order = used[np.argsort(first, kind="stable")]
    remap = np.zeros(len(values), np.int64)
    remap[order] = np.arange(order.size)
    return pa.DictionaryArray.from_arrays(pa.array(remap[codes].astype(index_type.to_pandas_dtype()), index_type),
                                          values.take(pa.array(order, pa.int64())).cast(pa.string()))


def _at_column(cols: RankColumns, lo: int, hi: int) -> pa.Array:
    """The findings' at_json for steps lo..hi (places.py): the placed checks' intervals on their
    rows as canonical JSON (step_tables.canonical: keys sorted), null elsewhere. The texts are
    made by Arrow compute for the placed rows only, then laid into the column's buffers: no
    Python object per row or interval, and no temporary array over every row but the offsets."""
    nc, rows = len(NAMES), (hi - lo) * len(NAMES)
    row_ids, per_row, starts, ends = [], [], [], []
    for j, placed in cols.at.items():
        a, b = int(placed.offsets[lo]), int(placed.offsets[hi])
        per = np.diff(placed.offsets[lo:hi + 1])
        has = np.flatnonzero(per)
        row_ids.append(has * nc + j)
        per_row.append(per[has])
        starts.append(placed.start_ns[a:b])
        ends.append(placed.end_ns[a:b])
    ids = np.concatenate(row_ids) if row_ids else np.zeros(0, _I64)
    if ids.size == 0:
        return pa.nulls(rows, pa.string())
    order = np.argsort(ids, kind="stable")  # placed rows in table order
    counts = np.concatenate(per_row)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # each row's first interval in the concatenation
    # the intervals gathered row by row in table order (each row's in time order)
    n_iv = counts[order]
    take = np.repeat(first[order], n_iv) + (np.arange(int(n_iv.sum())) - np.repeat(np.cumsum(n_iv) - n_iv, n_iv))
    s = pc.cast(pa.array(np.concatenate(starts)[take], pa.int64()), pa.string())
    e = pc.cast(pa.array(np.concatenate(ends)[take], pa.int64()), pa.string())
    one = pc.binary_join_element_wise('{"end_ns":', e, ',"start_ns":', s, "}", "")
    listed = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(n_iv)]).astype(np.int32)), one)
    texts = pc.binary_join_element_wise("[", pc.binary_join(listed, ","), "]", "")
    # Lay the placed rows' texts into a column over every row: lengths at their rows, the rest 0.
    t_off = np.frombuffer(texts.buffers()[1], np.int32, count=len(texts) + 1, offset=texts.offset * 4)
    offsets = np.zeros(rows + 1, np.int32)
    offsets[ids[order] + 1] = np.diff(t_off)
    np.cumsum(offsets, out=offsets)
    data = texts.buffers()[2][int(t_off[0]):int(t_off[-1])]
    valid = np.zeros(rows, bool)
    valid[ids] = True
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), data, pa.py_buffer(np.packbits(valid, bitorder="little")),
                                       null_count=rows - int(ids.size))


def _chunk(cols: RankColumns, lo: int, hi: int, code_of: list, texts):
    fr, n, nc = cols.frame, hi - lo, len(NAMES)
    i64, f64 = pa.int64(), pa.float64()

    off = None if cols.gpu_unrecorded is None else cols.gpu_unrecorded[lo:hi]

    def ints(v, unrecorded=None):
        if v is None:
            return pa.nulls(n, i64)
        return pa.array(np.asarray(v[lo:hi], _I64), i64, mask=unrecorded)

    m = cols.measures
    of = pa.nulls(n, f64)
    if cols.kernels_observed:
        values, null = measures.overlap_factors(m["kernel_sum_ns"][lo:hi], m["busy_ns"][lo:hi])
        of = pa.array(values, f64, mask=null if off is None else (null | off))
    data = {
        "step_id": ints(fr.ids), "rank": pa.nulls(n, i64) if cols.rank is None else pa.array(np.full(n, cols.rank, _I64), i64),
        "thread_id": ints(fr.tids), "start_ns": ints(fr.starts + cols.origin_ns), "end_ns": ints(fr.ends + cols.origin_ns),
        "wall_ns": ints(fr.wall), **{k: ints(m[k], off) for k in ("kernel_sum_ns", "busy_ns", "idle_ns", "host_api_ns", "host_sync_api_ns")},
        "overlap_factor": of, "gaps_count": ints(cols.gaps_count), "gaps_total_ns": ints(cols.gaps_total_ns),
        "gaps_longest_json": _longest_json(cols.gaps_longest, lo, hi),
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
    at = _at_column(cols, lo, hi)
    findings_tbl = pa.Table.from_arrays([
        pa.array(np.repeat(np.arange(n, dtype=_I64), nc), i64),
        _in_use(np.tile(np.arange(nc, dtype=np.int8), n), pa.array(list(NAMES), pa.string()), pa.int8()),
        _in_use(cols.verdict[lo:hi].ravel().astype(np.int8), pa.array(list(FINDING_VERDICTS), pa.string()), pa.int8()),
        pa.array(cols.explains_ns[lo:hi].ravel(), i64),
        pa.array(share, f64, mask=np.isnan(share)),
        _in_use(missing.astype(np.int32), texts, pa.int32()),
        evidence,
        at,
    ], schema=st.FINDINGS_SCHEMA)
    return steps_tbl, findings_tbl
