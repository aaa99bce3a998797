"""Hang versus straggler: which ranks hung the job, from each member's state of each op.

An op's progress (match.py) is `completed` (every member that can testify completed
it), `partial` or `pending` (no member completed it: a hang state, never a wait). Per op:

  never_joined     a member's dump (and its pg_status counters where the dump has them)
                   shows it never enqueued an op that is not completed
  stuck_on_device  the op is partial: this member enqueued it and it is still scheduled or
                   started on its device while peers completed it
  missing_dump     the op is pending and this member left no dump: it may be the one
  late            the op completed and its attribution names this rank late (a measured
                   wait from completed ops with timing; attribute.py)

One entry per (rank, kind, communicator), at its earliest op there; later ops of the same
rank and kind in that communicator are counted in `ops_affected`. A rank already named
for a hang in a communicator is not named again there for a later op (it is the same
stall). Entries are ordered by the earliest host enqueue of their op across all groups
(ranks on different hosts: within their clock domains' uncertainty); `hung_on` is the op
of the first hang entry, or the earliest pending op when no rank can be singled out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .types import (ATTRIBUTED, COMPLETED, HANG_KINDS, LATE, MISSING_DUMP, NEVER_JOINED, NO_DUMP, NOT_ENQUEUED,
                    PROGRESS_COMPLETED, PROGRESS_PARTIAL, PROGRESS_PENDING, SCHEDULED, STARTED, STATE_NAMES,
                    STUCK_ON_DEVICE, RankSource)

KIND_ORDER = {NEVER_JOINED: 0, STUCK_ON_DEVICE: 1, MISSING_DUMP: 2, LATE: 3}


def _first_enqueue(ident: pd.DataFrame) -> dict[tuple, int]:
    if ident.empty:
        return {}
    t = ident.dropna(subset=["enqueue_ns"]).groupby(["comm", "seq_id", "sub"])["enqueue_ns"].min()
    return {k: int(v) for k, v in t.items()}


def _counts(row: np.ndarray) -> dict[str, int]:
    vals, n = np.unique(row, return_counts=True)
    return {STATE_NAMES[int(v)]: int(c) for v, c in zip(vals, n)}


def _counter_text(src: RankSource | None, pg: str) -> str | None:
    c = (src.counters.get(pg) if src else None) or None
    if not c:
        return None
    return (f"pg_status of group {pg}: last enqueued {c.get('last_enqueued')}, last started {c.get('last_started')}, "
            f"last completed {c.get('last_completed')}")


def _hang_entries(op, codes: np.ndarray, sources: dict[int, RankSource]) -> list[dict]:
    ranks = list(op.expected_ranks)
    pg = str(op.pg_id)
    where = {"comm": op.comm, "pg_name": op.pg_name, "seq": int(op.seq_id), "sub": int(op.sub), "op": op.op_type}
    states = _counts(codes)
    done = [r for r, c in zip(ranks, codes) if c == COMPLETED]
    out = []
    for r, c in zip(ranks, codes):
        src = sources.get(r)
        ctr = _counter_text(src, pg)
        if c == NOT_ENQUEUED:
            ev = [f"rank {r}'s dump has no record of {op.op_type} seq {op.seq_id} while the group's other members "
                  f"are {states}"]
            if ctr:
                ev.append(ctr)
                cc = src.counters[pg]
                if cc.get("last_completed") is not None and cc.get("last_enqueued") is not None \
                        and cc["last_completed"] >= cc["last_enqueued"]:
                    ev.append("it completed everything it enqueued: its device was idle and its host never enqueued "
                              "this op (a host-side stall: the GIL, input, or another code path)")
            missing = [] if ctr else [f"no pg_status counters for group {pg} in rank {r}'s dump: the record window "
                                      "alone says it never enqueued the op (if its flight recorder was off, this reads the same)"]
            out.append({"rank": r, "kind": NEVER_JOINED, **where, "evidence": ev, "missing": missing})
        elif c in (SCHEDULED, STARTED) and done:
            ev = [f"rank {r}: {op.op_type} seq {op.seq_id} still {STATE_NAMES[c]} on its device while "
                  f"{len(done)} of {len(ranks) - 1} peers completed it"]
            if ctr:
                ev.append(ctr)
            out.append({"rank": r, "kind": STUCK_ON_DEVICE, **where, "evidence": ev,
                        "missing": [] if len(done) == len(ranks) - 1 else
                        [f"{len(ranks) - 1 - len(done)} other member(s) did not complete it either"]})
        elif c == NO_DUMP and not done:
            out.append({"rank": r, "kind": MISSING_DUMP, **where,
                        "evidence": [f"no dump of rank {r}; no member completed {op.op_type} seq {op.seq_id} (members: {states})"],
                        "missing": [f"rank {r}'s dump: cannot tell whether it never joined this op or is stuck on its device"]})
    return out


def _late_entry(op, att: dict) -> dict:
    waits = att["wait_ns"]
    w = max(waits.values()) if waits else 0
    return {"rank": int(att["late_rank"]), "kind": LATE, "comm": op.comm, "pg_name": op.pg_name, "seq": int(op.seq_id),
            "sub": int(op.sub), "op": op.op_type,
            "evidence": [f"{op.op_type} seq {op.seq_id} completed on every member; by {att['method']} the others waited up "
                         f"to {w / 1e6:.3f} ms (+/- {att['uncertainty_ns'] / 1e6:.3f} ms) for rank {att['late_rank']}"],
            "missing": [], "wait_ns": int(w)}


def culprits(ops: pd.DataFrame, ident: pd.DataFrame, atts: list[dict | None],
             sources: dict[int, RankSource]) -> tuple[list[dict], dict | None]:
    """(culprit entries in collective order, the op the job hung on or None)."""
    first_t = _first_enqueue(ident)
    best: dict[tuple, dict] = {}
    hung_in: set[tuple[int, str]] = set()
    pending_ops = []
    rows = list(ops.itertuples(index=False))
    order = sorted(range(len(rows)), key=lambda i: (first_t.get((rows[i].comm, int(rows[i].seq_id), int(rows[i].sub)), 1 << 62), i))
    for i in order:
        op = rows[i]
        t = first_t.get((op.comm, int(op.seq_id), int(op.sub)))
        if op.progress == PROGRESS_COMPLETED:
            a = atts[i] if atts else None
            entries = [_late_entry(op, a)] if a and a.get("verdict") == ATTRIBUTED else []
        else:
            pending_ops.append((t, op))
            entries = _hang_entries(op, np.asarray(op.state_codes), sources)
        for e in entries:
            e["first_enqueue_ns"] = t
            if e["kind"] in HANG_KINDS:
                if (e["rank"], op.comm) in hung_in:
                    continue
            key = (e["rank"], e["kind"], op.comm)
            if key in best:
                best[key]["ops_affected"] += 1
                if e["kind"] == LATE:
                    best[key]["wait_ns"] = max(best[key]["wait_ns"], e["wait_ns"])
                continue
            e["ops_affected"] = 1
            best[key] = e
        for e in entries:
            if e["kind"] in HANG_KINDS:
                hung_in.add((e["rank"], op.comm))
    out = sorted(best.values(), key=lambda e: (e["first_enqueue_ns"] if e["first_enqueue_ns"] is not None else 1 << 62,
                                               e["comm"], e["seq"], e["sub"], KIND_ORDER[e["kind"]], e["rank"]))
    return out, _hung_on(out, pending_ops)


def _hung_on(entries: list[dict], pending_ops: list) -> dict | None:
    hang = [e for e in entries if e["kind"] in HANG_KINDS]
    if hang:
        h = hang[0]
        at = [e for e in hang if (e["comm"], e["seq"], e["sub"]) == (h["comm"], h["seq"], h["sub"])]
        return {"comm": h["comm"], "pg_name": h["pg_name"], "seq": h["seq"], "sub": h["sub"], "op": h["op"],
                "culprit_ranks": sorted({e["rank"] for e in at}), "kinds": sorted({e["kind"] for e in at}),
                "reason": "the earliest op that some member never joined, is stuck on, or left no dump for"}
    if not pending_ops:
        return None
    t, op = min(pending_ops, key=lambda p: (p[0] if p[0] is not None else 1 << 62, p[1].comm, p[1].seq_id))
    return {"comm": op.comm, "pg_name": op.pg_name, "seq": int(op.seq_id), "sub": int(op.sub), "op": op.op_type,
            "culprit_ranks": [], "kinds": [],
            "reason": (f"the earliest op not completed ({op.progress}); every member enqueued it and none is singled out "
                       "by its dump: the stall is on the devices or the network, or the dumps were taken while it ran")
            if op.progress == PROGRESS_PENDING else f"the earliest op not completed ({op.progress})"}


__all__ = ["culprits", "PROGRESS_PARTIAL"]
