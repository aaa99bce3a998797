"""Per (rank, step) `collective_wait` findings from a collectives record, in the diagnosis' shape.

An op belongs to rank r's step when r's host enqueued it (or, without an enqueue time,
its GPU started it) inside the step, both on r's incident timeline. Per (rank, step):
  attributed      some op in the step was attributed to a late peer and this rank waited
                  >= min_wait_ns on it; explains_ns is the sum of those waits
  unresolved      no such op, and some op in the step is not matched (missing dump,
                  evicted, mismatch, a rank that never joined) or its attribution is unresolved
  not_applicable  no collective in the step, or every one resolved without a wait to name
Unresolved ops in an attributed step are still listed in `missing`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from .types import ATTRIBUTED, MATCHED, PENDING, UNRESOLVED

CHECK = "collective_wait"


def _steps_frame(steps) -> pd.DataFrame:
    if isinstance(steps, pa.Table):
        steps = steps.to_pandas()
    if not isinstance(steps, pd.DataFrame):
        steps = pd.DataFrame(list(steps), columns=["step_id", "start_ns", "end_ns"])
    return steps[["step_id", "start_ns", "end_ns"]].sort_values("start_ns").reset_index(drop=True)


def _op_times(analysis: dict) -> pd.DataFrame:
    rows = []
    for i, op in enumerate(analysis["ops"]):
        for rank, t in op["per_rank"].items():
            ts = t.get("enqueue_ns") if t.get("enqueue_ns") is not None else t.get("gpu_start_ns")
            if ts is not None:
                rows.append((int(rank), ts, i))
    return pd.DataFrame(rows, columns=["rank", "t_ns", "op"])


def _why(op: dict) -> str:
    a = op["attribution"]
    if op["status"] != MATCHED:
        who = op["missing_dump_ranks"] or op["not_joined_ranks"] or op["evicted_ranks"] or op.get("counter_ranks")
        return f"{op['comm']} seq {op['seq_id']} ({op['op_type']}): {op['status']}" + (f" (ranks {who})" if who else "")
    return f"{op['comm']} seq {op['seq_id']} ({op['op_type']}): {a['reason']}"


def collective_wait_findings(analysis: dict, steps_by_rank: Mapping[int, object]) -> list[dict]:
    """One finding per (rank, step): {rank, step_id, check, verdict, explains_ns, evidence, missing}.

    `steps_by_rank[rank]` is a `steps` table (pyarrow or pandas) or (step_id, start_ns, end_ns) rows.
    """
    min_wait = int(analysis["options"]["min_wait_ns"])
    times = _op_times(analysis)
    has_dump = set(analysis["ranks"])
    out: list[dict] = []
    for key in sorted(steps_by_rank, key=lambda k: -1 if k is None else int(k)):
        steps = _steps_frame(steps_by_rank[key])
        if key is None:
            # Single-process steps (rank null): collectives cannot be placed on them.
            out += [_unranked(int(s), bool(analysis["ops"])) for s in steps["step_id"]]
            continue
        rank = int(key)
        mine = times[times["rank"] == int(rank)].sort_values("t_ns")
        starts, ends = steps["start_ns"].to_numpy(dtype="int64"), steps["end_ns"].to_numpy(dtype="int64")
        t = mine["t_ns"].to_numpy(dtype="int64")
        pos = np.searchsorted(starts, t, side="right") - 1
        ok = pos >= 0
        ok[ok] &= t[ok] < ends[pos[ok]]
        by_step: dict[int, list[int]] = {}
        for p, op in zip(pos[ok], mine["op"].to_numpy()[ok]):
            by_step.setdefault(int(p), []).append(int(op))
        # A wrapped buffer lost this rank's oldest ops: steps before its window are unknown.
        wrapped = bool(analysis["ranks"].get(str(rank), {}).get("wrapped"))
        first_ns = int(t.min()) if wrapped and len(t) else None
        for p, step in steps.iterrows():
            ctx = {"has_dump": str(rank) in has_dump, "any_ops": bool(analysis["ops"]),
                   "kernel_only": bool(analysis["ranks"].get(str(rank), {}).get("kernel_only")),
                   "before_window": first_ns is not None and int(step["end_ns"]) <= first_ns}
            out.append(_finding(int(rank), int(step["step_id"]), [analysis["ops"][i] for i in by_step.get(p, [])],
                                ctx, min_wait))
    return out


def _unranked(step_id: int, any_ops: bool) -> dict:
    f = {"rank": None, "step_id": step_id, "check": CHECK, "verdict": "not_applicable", "explains_ns": 0,
         "evidence": [{"note": "no collective records"}], "missing": []}
    if any_ops:
        f.update(verdict=UNRESOLVED, evidence=[], missing=["steps carry no rank, so collectives cannot be placed in them"])
    return f


def _finding(rank: int, step_id: int, ops: list[dict], ctx: dict, min_wait: int) -> dict:
    f = {"rank": rank, "step_id": step_id, "check": CHECK, "verdict": "not_applicable", "explains_ns": 0,
         "evidence": [], "missing": []}
    if not ops:
        if ctx["kernel_only"]:
            f.update(verdict=UNRESOLVED, missing=[f"rank {rank} is seen only through NCCL kernels, without communicator or sequence identity"])
        elif ctx["any_ops"] and not ctx["has_dump"]:
            f.update(verdict=UNRESOLVED, missing=[f"no collective records for rank {rank} (its dump is missing)"])
        elif ctx["before_window"]:
            f.update(verdict=UNRESOLVED, missing=[f"step precedes rank {rank}'s flight-recorder window (its ring buffer wrapped)"])
        else:
            f["evidence"].append({"note": "no collective recorded on this rank in this step"})
        return f
    waited = 0
    for op in ops:
        a = op["attribution"]
        if op["status"] != MATCHED or a is None or a["verdict"] in (UNRESOLVED, PENDING):
            f["missing"].append(_why(op))
            continue
        if a["verdict"] != ATTRIBUTED:
            continue
        mine = a["wait_ns"].get(str(rank), 0)
        item = {"comm": op["comm"], "seq_id": op["seq_id"], "op_type": op["op_type"], "late_rank": a["late_rank"],
                "wait_ns": mine, "method": a["method"], "uncertainty_ns": a["uncertainty_ns"],
                "arrival_skew_ns": a["arrival_skew_ns"]}
        if a["late_rank"] == rank:
            item["role"] = "late"
            item["late_host"] = a.get("late_host")
        elif mine >= min_wait:
            item["role"] = "waited"
            waited += mine
        else:
            item["role"] = "arrived_near_late"
        f["evidence"].append(item)
    if waited:
        f.update(verdict=ATTRIBUTED, explains_ns=int(waited))
    elif f["missing"]:
        f["verdict"] = UNRESOLVED
    return f


def steps_from_incidents(incidents: Iterable) -> dict[int, pd.DataFrame]:
    """steps_by_rank from incidents' `steps` tables (rank column; single-rank incidents by manifest)."""
    out: dict[int, list[pd.DataFrame]] = {}
    for inc in incidents:
        t = inc.table("steps").to_pandas()
        if t.empty:
            continue
        ranks = inc.manifest.get("ranks") or []
        if t["rank"].isna().any() and len(ranks) == 1:
            t["rank"] = t["rank"].fillna(ranks[0])
        for r, g in t[t["rank"].notna()].groupby("rank"):
            out.setdefault(int(r), []).append(g)
    return {r: pd.concat(gs).drop_duplicates(["step_id"]) for r, gs in out.items()}
