"""Collective records of every rank, from one or several incidents, as one DataFrame.

Sources: the `collectives` table (flight-recorder imports, the recorder) and NCCL kernels
in the `kernels` table (Kineto imports, CUPTI). A kernel names its op family but not its
communicator or sequence number, so kernels only lend GPU start/end to a rank's recorded
ops (linked in order, per op family); a rank with kernels and no records yields
`kernel_order` rows that matching reports as unidentified, never matches.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa

from ..core.errors import StallcaseError
from ..core.incident import Incident
from ..core.vocabulary import COLLECTIVE_KERNEL_RE
from .dump_detail import dump_details
from .types import RankSource

# ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), ncclKernel_AllGather_RING_LL_Sum_int8_t(...)
_KERNEL_FAMILY = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_FAMILY_TO_OPS = {
    "AllReduce": {"all_reduce", "allreduce_coalesced", "all_reduce_barrier", "barrier"},
    "AllGather": {"all_gather", "_all_gather_base", "all_gather_into_tensor_coalesced", "ALLGATHER_coalesced", "all_gather_single"},
    "ReduceScatter": {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced", "REDUCE_SCATTER_coalesced", "reduce_scatter_single"},
    "Broadcast": {"broadcast", "_broadcast_oop"},
    "Reduce": {"reduce", "_reduce_oop"},
    "SendRecv": {"send", "recv", "all_to_all", "all_to_all_single", "gather", "scatter"},
}
_OP_TO_FAMILY = {op: fam for fam, ops in _FAMILY_TO_OPS.items() for op in ops}

# Nanosecond columns stay exact Int64: realtime ns (~1.8e18) do not fit a float64 mantissa.
NS_COLUMNS = ["enqueue_ns", "gpu_start_ns", "gpu_end_ns", "gpu_duration_ns", "record_id"]


def _types(t: pa.DataType):
    return {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}.get(t)


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Arrow -> pandas keeping nullable integers exact (no float64 detour)."""
    return table.to_pandas(types_mapper=_types)


COLUMNS = ["incident", "rank", "comm", "pg_id", "pg_name", "group_ranks", "seq_id", "op_type", "input_sizes",
           "output_sizes", "dtypes", "enqueue_ns", "gpu_start_ns", "gpu_end_ns", "gpu_duration_ns", "state",
           "record_id", "identity"]


def kernel_family(names: pd.Series) -> pd.Series:
    fam = names.str.extract(_KERNEL_FAMILY, expand=False)
    return fam.replace({"Send": "SendRecv", "Recv": "SendRecv"})


# The collectives table's JSON-text columns and the JSON shape each must hold (fr_dump writes them).
JSON_COLUMNS = {"input_sizes": (list,), "output_sizes": (list,), "dtypes": (dict,), "group_ranks": (list,)}


def check_json_columns(df: pd.DataFrame, where) -> None:
    """Every value of a JSON-text column is JSON of its shape: broken text or a `null` there is one
    line naming the column and the value, before matching reads it (each distinct value once)."""
    import json

    from ..core.bounds import show
    from ..core.errors import InputError

    for col, shapes in JSON_COLUMNS.items():
        if col not in df.columns:
            continue
        for v in df[col].dropna().unique():
            try:
                got = json.loads(v)
            except (ValueError, RecursionError) as exc:
                raise InputError(where, f"table collectives, column {col}: {show(v)} is not JSON ({str(exc)[:80]})") from None
            if not isinstance(got, shapes) or (col == "group_ranks" and not all(type(r) is int for r in got)) or (
                    isinstance(got, dict) and not all(isinstance(got.get(k, []), list) for k in ("input", "output"))):
                want = "a list of rank numbers" if col == "group_ranks" else (
                    "a JSON object of lists" if dict in shapes else "a JSON list")
                raise InputError(where, f"table collectives, column {col}: {show(v)} is not {want}")


def _records(inc: Incident) -> pd.DataFrame:
    df = to_pandas(inc.table("collectives"))
    check_json_columns(df, inc.path)
    df["incident"] = str(inc.path)
    df["comm"] = df["pg_id"] + "|" + df["group_ranks"].fillna("?")
    df["identity"] = "seq"
    # Durations from start/end where only those are known (CUPTI-linked or recorder rows).
    both = df["gpu_duration_ns"].isna() & df["gpu_start_ns"].notna() & df["gpu_end_ns"].notna()
    df.loc[both, "gpu_duration_ns"] = df.loc[both, "gpu_end_ns"] - df.loc[both, "gpu_start_ns"]
    return df


def _nccl_kernels(inc: Incident) -> pd.DataFrame:
    k = to_pandas(inc.table("kernels"))
    k = k[k["name"].str.contains(COLLECTIVE_KERNEL_RE)].copy()
    if k["rank"].isna().any():
        ranks = inc.manifest.get("ranks") or []
        if len(ranks) == 1:
            k["rank"] = k["rank"].fillna(ranks[0])
        else:
            k = k[k["rank"].notna()]  # cannot tell whose kernel it is
    k["family"] = kernel_family(k["name"])
    return k


def _link_kernels(rec: pd.DataFrame, kern: pd.DataFrame) -> pd.DataFrame:
    """Give recorded ops without GPU times the start/end of their NCCL kernel.

    Per (rank, op family): ops in enqueue order take the first kernel starting at or after
    their enqueue. Where two ops would take the same kernel the link is ambiguous and both
    stay unlinked.
    """
    rec = rec.copy()
    rec["family"] = rec["op_type"].map(_OP_TO_FAMILY)
    todo = rec["gpu_start_ns"].isna() & rec["family"].notna() & rec["enqueue_ns"].notna()
    for (rank, fam), ops in rec[todo].groupby(["rank", "family"]):
        ks = kern[(kern["rank"] == rank) & (kern["family"] == fam)].sort_values("start_ns")
        if ks.empty:
            continue
        ops = ops.sort_values("enqueue_ns")
        starts = ks["start_ns"].to_numpy(dtype="int64")
        idx = np.searchsorted(starts, ops["enqueue_ns"].to_numpy(dtype="int64"), side="left")
        ok = idx < len(ks)
        dup = pd.Series(idx).duplicated(keep=False).to_numpy()
        ok &= ~dup
        sel = ops.index[ok]
        rec.loc[sel, "gpu_start_ns"] = starts[idx[ok]]
        rec.loc[sel, "gpu_end_ns"] = ks["end_ns"].to_numpy(dtype="int64")[idx[ok]]
        nodur = sel[rec.loc[sel, "gpu_duration_ns"].isna()]
        rec.loc[nodur, "gpu_duration_ns"] = rec.loc[nodur, "gpu_end_ns"] - rec.loc[nodur, "gpu_start_ns"]
    return rec.drop(columns=["family"])


def _kernel_only(inc: Incident, kern: pd.DataFrame) -> pd.DataFrame:
    k = kern.sort_values("start_ns").copy()
    k["seq_id"] = k.groupby(["rank", "stream"]).cumcount() + 1
    return pd.DataFrame({
        "incident": str(inc.path), "rank": k["rank"].astype("int64"), "comm": "stream:" + k["stream"].astype(str),
        "pg_id": "stream:" + k["stream"].astype(str), "pg_name": None, "group_ranks": None, "seq_id": k["seq_id"],
        "op_type": k["family"].fillna("nccl_kernel"), "input_sizes": None, "output_sizes": None, "dtypes": None,
        "enqueue_ns": pd.array([pd.NA] * len(k), dtype="Int64"), "gpu_start_ns": k["start_ns"], "gpu_end_ns": k["end_ns"],
        "gpu_duration_ns": k["end_ns"] - k["start_ns"], "state": "completed",
        "record_id": pd.array([pd.NA] * len(k), dtype="Int64"), "identity": "kernel_order",
    }, index=k.index)


def _dump_details(inc: Incident) -> dict[str, dict]:
    """rank -> the manifest's detail of that rank's flight-recorder dump (importer or recorder)."""
    return dump_details(inc.manifest, inc.path)  # shape checked: a null where an object belongs is one line


def _rank_host(inc: Incident, detail: dict | None) -> str | None:
    """The host a rank ran on: given at import, else the incident's own (a recorder writes it)."""
    if detail and detail.get("hostname"):
        return str(detail["hostname"])
    return (inc.manifest.get("provenance") or {}).get("hostname")


def load(incidents: list[Incident]) -> tuple[pd.DataFrame, dict[int, RankSource]]:
    """All ranks' records (COLUMNS) and, per rank, where its dump came from.

    A rank found in two incidents is refused: the two dumps would be two different
    moments of that rank, and matching them against other ranks would pair the wrong ops.
    """
    frames: list[pd.DataFrame] = []
    sources: dict[int, RankSource] = {}
    for inc in incidents:
        rec = _records(inc)
        kern = _nccl_kernels(inc)
        if not kern.empty and not rec.empty:
            rec = _link_kernels(rec, kern)
        orphan = kern[~kern["rank"].isin(rec["rank"].unique())] if not kern.empty else kern
        detail = _dump_details(inc)
        # A rank "has a dump" only where collectives were observed for it: its rows, its FR
        # dump (possibly empty), or a recorder that declares the `collectives` source
        # observed for the incident's ranks. A rank merely listed in the manifest (say, by a
        # recorder that did not trace collectives) must not read as "never joined".
        ranks = set(int(r) for r in detail) | set(int(r) for r in rec["rank"].unique())
        if inc.observed("collectives"):
            ranks |= set(int(r) for r in inc.manifest.get("ranks") or [])
        ranks |= set(int(r) for r in orphan["rank"].unique()) if not orphan.empty else set()
        for r in sorted(ranks):
            if r in sources:
                raise StallcaseError(inc.path, f"rank {r} is also in incident {sources[r].incident}; give each rank's dump once")
            mine = rec[rec["rank"] == r]
            first = mine["record_id"].min() if not mine.empty else None
            d = detail.get(str(r))
            if d is not None and "wrapped_reason" in d:
                wrapped = bool(d["wrapped"])  # decided from record ids and counters (formats/fr_dump.py)
            else:  # an older import: only the record ids
                wrapped = bool((d or {}).get("wrapped", False)) or (first is not None and pd.notna(first) and first > 0)
            sources[r] = RankSource(rank=r, incident=str(inc.path), wrapped=bool(wrapped), records=int(len(mine)),
                                    kernel_only=mine.empty and not orphan.empty and bool((orphan["rank"] == r).any()),
                                    counters=dict((d or {}).get("groups") or {}), hostname=_rank_host(inc, d),
                                    pending_only=bool((d or {}).get("pending_only", False)),
                                    dump_version=(d or {}).get("version"))
        frames.append(rec)
        if not orphan.empty:
            frames.append(_kernel_only(inc, orphan))
    frames = [f.reindex(columns=COLUMNS).astype({c: "Int64" for c in NS_COLUMNS}) for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS), sources
    df = pd.concat(frames, ignore_index=True)
    df["rank"] = df["rank"].astype("int64")
    df["seq_id"] = df["seq_id"].astype("int64")
    return df, sources
