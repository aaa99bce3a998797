"""load -> match -> attribute -> culprits -> transport, assembled into the `collectives` record."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.incident import Incident
from .attribute import attribute
from .clocks import domains
from .culprits import culprits
from .load import load
from .match import KEY, match
from .transport import transport
from .types import ATTRIBUTED, PENDING, PROGRESSES, SCHEMA_VERSION, STATE_NAMES, STATUSES, UNRESOLVED, Options


def _int(v) -> int | None:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else int(v)


def _per_rank(ident: pd.DataFrame) -> dict[tuple, dict]:
    """(comm, seq_id, sub) -> {rank: times of that rank's record}, each on its own incident's timeline."""
    out: dict[tuple, dict] = {}

    def col(name):  # plain Python values, None for missing (no per-cell pandas scalars)
        c = ident[name]
        return c.astype(object).where(c.notna(), None).tolist()

    rows = zip(ident["comm"].tolist(), ident["seq_id"].tolist(), ident["sub"].tolist(), ident["rank"].tolist(),
               ident["incident"].tolist(), col("enqueue_ns"), col("gpu_start_ns"), col("gpu_duration_ns"), col("state"))
    for comm, seq, sub, rank, inc, enq, start, dur, state in rows:
        out.setdefault((comm, int(seq), int(sub)), {})[str(int(rank))] = {
            "incident": inc, "enqueue_ns": None if enq is None else int(enq),
            "gpu_start_ns": None if start is None else int(start),
            "gpu_duration_ns": None if dur is None else int(dur), "state": None if state is None else str(state)}
    return out


def _unidentified(df: pd.DataFrame) -> list[dict]:
    k = df[df["identity"] == "kernel_order"]
    if k.empty:
        return []
    agg = k.groupby(["incident", "rank", "comm"]).agg(kernels=("seq_id", "size"), first_ns=("gpu_start_ns", "min"),
                                                     last_ns=("gpu_start_ns", "max")).reset_index()
    return [{"incident": r.incident, "rank": int(r.rank), "stream": r.comm, "kernels": int(r.kernels),
             "first_ns": int(r.first_ns), "last_ns": int(r.last_ns),
             "reason": "NCCL kernels without communicator or sequence identity (import the flight-recorder dumps too)"}
            for r in agg.itertuples()]


def _window(df: pd.DataFrame) -> dict[str, tuple[int, int]]:
    t = df.assign(t=df["enqueue_ns"].fillna(df["gpu_start_ns"]))
    g = t.groupby("incident")["t"].agg(["min", "max"]).dropna()
    return {inc: (int(r["min"]), int(r["max"])) for inc, r in g.iterrows()}


def analyze_collectives(incidents: list[Incident], options: Options | None = None) -> dict:
    """The collectives record (schemas/collectives.schema.json) for one or several incidents."""
    opts = options or Options()
    df, sources = load(incidents)
    ops, comms, ident = match(df, sources)
    doms = domains(incidents, sources, opts)
    atts = attribute(ops, ident, sources, doms, incidents, opts) if len(ops) else []
    found, hung_on = culprits(ops, ident, atts, sources) if len(ops) else ([], None)
    per_rank = _per_rank(ident)
    op_records = []
    for i, op in enumerate(ops.itertuples(index=False)):
        key = (op.comm, int(op.seq_id), int(op.sub))
        op_records.append({
            "progress": op.progress,
            "states": {str(r): STATE_NAMES[int(c)] for r, c in zip(op.expected_ranks, op.state_codes)},
            "counter_ranks": list(op.counter_ranks),
            "comm": op.comm, "pg_id": op.pg_id, "pg_name": None if pd.isna(op.pg_name) else op.pg_name,
            "seq_id": int(op.seq_id), "sub": int(op.sub), "op_type": op.op_type, "status": op.status,
            "expected_ranks": list(op.expected_ranks), "present_ranks": list(op.present_ranks),
            "missing_dump_ranks": list(op.missing_dump_ranks), "evicted_ranks": list(op.evicted_ranks),
            "not_joined_ranks": list(op.not_joined_ranks), "mismatches": _jsonable(op.mismatches),
            "per_rank": per_rank.get(key, {}), "attribution": _jsonable(atts[i]) if atts else None,
        })
    status_counts = {s: int((ops["status"] == s).sum()) for s in STATUSES} if len(ops) else {s: 0 for s in STATUSES}
    progress_counts = {p: int((ops["progress"] == p).sum()) if len(ops) else 0 for p in PROGRESSES}
    verdicts = [a["verdict"] for a in atts if a]
    ident_all = df[df["identity"] == "seq"]
    record = {
        "schema_version": SCHEMA_VERSION, "kind": "collectives",
        "hung_on": _jsonable(hung_on),
        "culprits": _jsonable(found),
        "culprit_order": _order_note(found, doms),
        "incidents": [{"path": str(i.path), "incident_id": i.manifest["incident_id"], "clock_host": i.manifest["clock"]["host"],
                       "ranks": sorted(r for r, s in sources.items() if s.incident == str(i.path))} for i in incidents],
        "options": opts.to_json(),
        "ranks": {str(r): _jsonable(s.to_json()) for r, s in sorted(sources.items())},
        "clock_domains": [_jsonable(d.to_json()) for _, d in sorted(doms.items())],
        "summary": {
            "ops": int(len(ops)), **status_counts,
            "attributed": verdicts.count(ATTRIBUTED), "unresolved": verdicts.count(UNRESOLVED),
            "pending": verdicts.count(PENDING),
            "not_attributed": len(verdicts) - verdicts.count(ATTRIBUTED) - verdicts.count(UNRESOLVED) - verdicts.count(PENDING),
            **{f"{p}_ops": n for p, n in progress_counts.items()}, "culprits": len(found),
            "clock_groups": len({d.group for d in doms.values()}),
            "p2p_skipped": int(ident_all["op_type"].isin(["send", "recv", "coalesced_p2p"]).sum()),
        },
        "communicators": _jsonable(comms),
        "ops": op_records,
        "unidentified": _unidentified(df),
        "transport": transport(incidents, _window(df) if len(df) else None),
    }
    # Validated where it is persisted (records.write_record); validating 10k ops here too
    # would double the analysis time.
    return record


def _order_note(found: list[dict], doms: dict) -> dict:
    """How far the culprits' order across communicators can be trusted.

    Within one communicator the order is the sequence numbers' (exact). Across
    communicators it is the earliest host enqueue of each op, which compares clocks of
    different ranks: exact only when every rank is in one clock domain."""
    comms = {c["comm"] for c in found}
    one_domain = len({d.group for d in doms.values()}) <= 1
    if len(comms) <= 1 or one_domain:
        return {"basis": "sequence numbers" if len(comms) <= 1 else "earliest host enqueue, one clock domain",
                "exact": True}
    return {"basis": "earliest host enqueue across clock domains that cannot be compared", "exact": False,
            "note": "ops of different communicators first enqueued on different hosts are ordered by clocks whose offset "
                    "is unknown: their order is a guess unless their enqueue times differ by more than that offset"}


def _jsonable(v):
    """numpy/pandas scalars -> plain Python, recursively (records are JSON)."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return None if np.isnan(v) else float(v)
    return v


__all__ = ["analyze_collectives", "KEY"]
