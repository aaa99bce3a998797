"""Align ranks on (communicator, sequence number) and say what does not match, and whose fault.

A communicator is a process group's name plus its member ranks (torch's analyzer keys
groups the same way, since split groups may reuse a name). Within it, every member rank
numbers its collectives 1, 2, 3...; ops inside one coalesced batch share a number and are
told apart by their order (`sub`). Each rank's ring buffer keeps a window [lo, hi] of
those numbers per communicator; an op outside a rank's window was evicted (below lo) or
never reached (above hi), and a hole inside the window is an op the rank skipped.

Per op, the first status that applies:
  not_joined        a member rank has a dump and it shows the rank never enqueued the op
                    (culprit: that rank, decided)
  mismatch          present ranks disagree on op type, sizes or dtypes; culprit = the
                    ranks outside a strict majority of ALL member ranks, otherwise
                    "cannot decide" (two ranks disagreeing, or missing dumps could tip it)
  cannot_decide     a member rank's dump is missing
  incomplete_window the op fell out of some rank's ring buffer (or before its window)
  matched           every member rank recorded the same op
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..core.errors import StallcaseError
from ..core.config.numbers import BYTES_PER_MATCH_CELL, MAX_MATCH_CELLS, MEMORY_BUDGET_BYTES
from .types import (CANNOT_DECIDE, COMPLETED, ENTRY_STATE, INCOMPLETE_WINDOW, INPUT_SIZES_FREE, JOINED_BY_COUNTER,
                    MATCHED, MISMATCH, NO_DUMP, NOT_ENQUEUED, NOT_JOINED, OUTPUT_SIZES_FREE, P2P_OPS, PROGRESS_COMPLETED,
                    PROGRESS_PARTIAL, PROGRESS_PENDING, SCHEDULED, STARTED, UNKNOWN, RankSource)

KEY = ["seq_id", "sub"]
FIELDS = ("op_type", "input_sizes", "output_sizes", "dtypes")


def _dtype_set(s: pd.Series) -> pd.Series:
    # Compare the set of element types an op moves: a scatter's non-root rank has no
    # input dtype but the same output dtype, and that is not a mismatch.
    def norm(v):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        d = json.loads(v)
        return json.dumps(sorted(set(d.get("input", [])) | set(d.get("output", []))))
    # Few distinct values (one per op signature): decode each once.
    return s.map({v: norm(v) for v in s.dropna().unique()})


def identified(df: pd.DataFrame) -> pd.DataFrame:
    """Collective records with communicator and sequence identity, with `sub` (order in a coalesced batch)."""
    ident = df[(df["identity"] == "seq") & ~df["op_type"].isin(P2P_OPS)].copy()
    ident = ident.sort_values(["rank", "comm", "seq_id", "record_id", "enqueue_ns"], kind="stable")
    ident["sub"] = ident.groupby(["rank", "comm", "seq_id"]).cumcount()
    ident["dtype_set"] = _dtype_set(ident["dtypes"])
    return ident


def _expected(g: pd.DataFrame) -> tuple[list[int], bool]:
    known = g["group_ranks"].dropna()
    if not known.empty:
        return sorted(int(r) for r in json.loads(known.iloc[0])), True
    return sorted(int(r) for r in g["rank"].unique()), False


def _field_mismatch(g: pd.DataFrame, keys: pd.MultiIndex, op_type: pd.Series) -> dict[str, np.ndarray]:
    out = {}
    for f in FIELDS:
        col = "dtype_set" if f == "dtypes" else f
        n = g.groupby(KEY)[col].nunique(dropna=False).reindex(keys).fillna(1).to_numpy() > 1
        if f == "input_sizes":
            n &= ~op_type.isin(INPUT_SIZES_FREE).to_numpy()
        elif f == "output_sizes":
            n &= ~op_type.isin(OUTPUT_SIZES_FREE).to_numpy()
        out[f] = n
    return out


def _culprits(values: dict[int, object], expected: list[int], missing: list[int]) -> dict:
    """Majority vote over ALL member ranks: decided only if one value has a strict majority."""
    counts: dict[object, list[int]] = {}
    for r, v in values.items():
        counts.setdefault(v, []).append(r)
    best, holders = max(counts.items(), key=lambda kv: len(kv[1]))
    if len(holders) * 2 > len(expected):
        return {"decided": True, "culprit_ranks": sorted(r for r in values if r not in holders), "majority_value": best,
                "reason": f"{len(holders)} of {len(expected)} member ranks agree"}
    why = "two ranks disagree and neither is a majority" if len(expected) == 2 and not missing else \
        f"no value is held by a strict majority of the {len(expected)} member ranks"
    if missing:
        why += f"; dumps of rank(s) {missing} are missing and could tip it"
    return {"decided": False, "culprit_ranks": [], "majority_value": None, "reason": "cannot decide: " + why}


def _counter_arrays(pg: str, expected: list[int], sources: dict[int, RankSource]) -> dict[str, np.ndarray]:
    """Per member rank: last enqueued / started / completed seq of group `pg` (NaN: not known)."""
    out = {}
    for k in ("last_enqueued", "last_started", "last_completed"):
        vals = []
        for r in expected:
            c = sources[r].counters.get(pg) if r in sources else None
            v = c.get(k) if c else None
            vals.append(np.nan if v is None else float(v))
        out[k] = np.array(vals)[None, :]
    return out


def _states(g: pd.DataFrame, keys: pd.MultiIndex, expected: list[int], present: np.ndarray, seq: np.ndarray,
            sources: dict[int, RankSource], pg: str) -> tuple[np.ndarray, np.ndarray]:
    """(state codes [op, rank], from_counter [op, rank]): what each member's dump says about each op.

    A record's own state (as the watchdog last saw its CUDA events) is upgraded by the
    rank's pg_status counters; a rank without a record of the op is placed by its
    counters: <= last_completed completed it, <= last_started started it, <= last_enqueued
    enqueued it (record lost), above it never enqueued it. Without counters, the record
    window decides as before: before the window (or a wrapped buffer without any record
    of the group) the rank cannot testify; otherwise it never enqueued the op.
    """
    n_ops, n_r = present.shape
    code = (g["state"].map(ENTRY_STATE).fillna(SCHEDULED).astype("int64"))
    st = (g.assign(code=code).pivot_table(index=KEY, columns="rank", values="code", aggfunc="min")
          .reindex(index=keys, columns=expected).to_numpy(dtype=float))
    ctr = _counter_arrays(pg, expected, sources)
    E, S, C = ctr["last_enqueued"], ctr["last_started"], ctr["last_completed"]
    has_ctr = ~np.isnan(E) | ~np.isnan(C)
    with np.errstate(invalid="ignore"):
        by_ctr = np.select([seq <= C, seq <= S, seq <= E, has_ctr & ~(seq <= E)],
                           [COMPLETED, STARTED, SCHEDULED, NOT_ENQUEUED], default=-1).astype(float)
    win = g.groupby("rank")["seq_id"].agg(["min", "max"]).reindex(expected)
    lo, hi = win["min"].to_numpy(dtype=float)[None, :], win["max"].to_numpy(dtype=float)[None, :]
    has_dump = np.array([r in sources and not sources[r].kernel_only for r in expected])[None, :]
    wrapped = np.array([sources[r].wrapped if r in sources else False for r in expected])[None, :]
    pending_only = np.array([sources[r].pending_only if r in sources else False for r in expected])[None, :]
    by_window = np.where((seq < lo) | (np.isnan(lo) & wrapped), UNKNOWN, NOT_ENQUEUED)
    # Inside the record window of a full dump the records are the truth: FR records every
    # op it enqueues, so a hole is an op this rank never enqueued. An onlyActive dump
    # leaves completed ops out: there (and outside any window) the counters place it.
    hole = (seq >= lo) & (seq <= hi) & ~pending_only
    absent = np.where((by_ctr >= 0) & ~hole, by_ctr, by_window)
    state = np.where(present, np.fmax(st, np.where(by_ctr >= SCHEDULED, by_ctr, -1)), absent)
    state = np.where(has_dump, state, NO_DUMP).astype(np.int8)
    return state, (~present & (by_ctr >= 0) & has_dump)


def _progress(state: np.ndarray) -> np.ndarray:
    known = state >= NOT_ENQUEUED
    done = (state == COMPLETED).any(1)
    all_done = ((state == COMPLETED) | ~known).all(1)
    return np.where(all_done & done, PROGRESS_COMPLETED, np.where(done, PROGRESS_PARTIAL, PROGRESS_PENDING))


def match_comm(comm: str, g: pd.DataFrame, sources: dict[int, RankSource]) -> tuple[pd.DataFrame, dict]:
    """Ops of one communicator with their status, plus a summary of the communicator."""
    expected, membership_known = _expected(g)
    keys = pd.MultiIndex.from_frame(g[KEY].drop_duplicates().sort_values(KEY))
    if len(keys) * len(expected) > MAX_MATCH_CELLS:  # before any [op, rank] matrix is allocated
        raise StallcaseError(str(g["incident"].iloc[0]), f"process group {g['pg_id'].iloc[0]!r}: {len(keys)} ops x {len(expected)} member ranks = "
                                                         f"{len(keys) * len(expected)} cells, over the analysis's cap of {MAX_MATCH_CELLS} "
                                                         f"({BYTES_PER_MATCH_CELL} B a cell within the {MEMORY_BUDGET_BYTES >> 30} GiB memory budget)")
    present = (g.assign(one=1).pivot_table(index=KEY, columns="rank", values="one", aggfunc="sum")
               .reindex(index=keys, columns=expected).notna().to_numpy())
    seq = keys.get_level_values("seq_id").to_numpy()[:, None]
    win = g.groupby("rank")["seq_id"].agg(["min", "max"]).reindex(expected)
    pg = str(g["pg_id"].iloc[0])
    state, by_counter = _states(g, keys, expected, present, seq, sources, pg)
    missing_dump = state == NO_DUMP
    evicted = state == UNKNOWN
    not_joined = state == NOT_ENQUEUED
    progress = _progress(state)

    # The most common op type per key (ties: alphabetical), without a per-group lambda.
    counts = g.groupby(KEY + ["op_type"]).size().rename("n").reset_index()
    counts = counts.sort_values(KEY + ["n", "op_type"], ascending=[True, True, False, True]).drop_duplicates(KEY)
    op_type = counts.set_index(KEY)["op_type"].reindex(keys)
    mism = _field_mismatch(g, keys, op_type)
    any_mism = np.logical_or.reduce([mism[f] for f in FIELDS])
    status = np.select(
        [not_joined.any(1), any_mism, missing_dump.any(1), evicted.any(1), by_counter.any(1)],
        [NOT_JOINED, MISMATCH, CANNOT_DECIDE, INCOMPLETE_WINDOW, JOINED_BY_COUNTER], default=MATCHED)

    exp = np.array(expected)
    ops = pd.DataFrame({"comm": comm, "seq_id": keys.get_level_values("seq_id"), "sub": keys.get_level_values("sub"),
                        "op_type": op_type.to_numpy(), "status": status, "progress": progress})
    first = g.drop_duplicates("comm").iloc[0]
    ops["pg_id"], ops["pg_name"] = first["pg_id"], first["pg_name"]
    ops["expected_ranks"] = [expected] * len(ops)
    ops["present_ranks"] = [exp[row].tolist() for row in present]
    ops["missing_dump_ranks"] = [exp[row].tolist() for row in missing_dump]
    ops["evicted_ranks"] = [exp[row].tolist() for row in evicted]
    ops["not_joined_ranks"] = [exp[row].tolist() for row in not_joined]
    ops["counter_ranks"] = [exp[row].tolist() for row in by_counter]
    ops["state_codes"] = list(state)
    ops["mismatches"] = [[] for _ in range(len(ops))]
    for i in np.flatnonzero(any_mism | not_joined.any(1)):
        ops.at[i, "mismatches"] = _describe(g, keys[i], expected, mism, i, ops.loc[i])

    summary = {
        "comm": comm, "pg_id": first["pg_id"], "pg_name": first["pg_name"], "expected_ranks": expected,
        "membership_known": membership_known, "ops": int(len(ops)),
        "windows": {str(r): [int(win.loc[r, "min"]), int(win.loc[r, "max"])] for r in expected if pd.notna(win.loc[r, "min"])},
        "counters": {str(r): {k: sources[r].counters[pg].get(k) for k in ("last_enqueued", "last_started", "last_completed")}
                     for r in expected if r in sources and pg in sources[r].counters},
        "ranks_missing_dump": [r for r in expected if r not in sources or sources[r].kernel_only],
        "status_counts": {s: int((status == s).sum()) for s in np.unique(status)},
        "progress_counts": {p: int((progress == p).sum()) for p in np.unique(progress)},
        "first_problem": None,
    }
    bad = ops[ops["status"].isin([NOT_JOINED, MISMATCH])]
    if not bad.empty:
        summary["first_problem"] = {"seq_id": int(bad.iloc[0]["seq_id"]), "status": bad.iloc[0]["status"]}
    if not membership_known:
        summary["note"] = "member ranks unknown (no pg_config): a rank that never recorded this group cannot be detected"
    outsiders = sorted(set(int(r) for r in g["rank"].unique()) - set(expected))
    if outsiders:
        # Their records are left out of matching: they claim a group they are not members of.
        summary["outside_ranks"] = outsiders
    return ops, summary


def _describe(g: pd.DataFrame, key, expected: list[int], mism: dict, i: int, op: pd.Series) -> list[dict]:
    rows = g[(g["seq_id"] == key[0]) & (g["sub"] == key[1])].set_index("rank")
    out = []
    if op["not_joined_ranks"]:
        out.append({"field": "joined", "values": {str(r): (r in rows.index) for r in expected},
                    "decided": True, "culprit_ranks": list(op["not_joined_ranks"]),
                    "reason": "the dump of these rank(s) shows they never enqueued this op"})
    for f in FIELDS:
        if not mism[f][i]:
            continue
        col = "dtype_set" if f == "dtypes" else f
        values = {int(r): rows.loc[r, col] for r in rows.index}
        verdict = _culprits(values, expected, list(op["missing_dump_ranks"]))
        out.append({"field": f, "values": {str(r): v for r, v in values.items()}, **verdict})
    return out


def match(df: pd.DataFrame, sources: dict[int, RankSource]) -> tuple[pd.DataFrame, list[dict], pd.DataFrame]:
    """(ops, communicator summaries, identified per-rank records with `sub`)."""
    ident = identified(df)
    parts, comms = [], []
    for comm, g in ident.groupby("comm", sort=True):
        ops, summary = match_comm(comm, g, sources)
        parts.append(ops)
        comms.append(summary)
    ops = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["comm", "seq_id", "sub", "op_type", "status", "progress", "pg_id", "pg_name", "expected_ranks",
                 "present_ranks", "missing_dump_ranks", "evicted_ranks", "not_joined_ranks", "counter_ranks",
                 "state_codes", "mismatches"])
    return ops, comms, ident
