"""`stallcase import torch-fr DUMP... --incident ID`: PyTorch NCCL flight-recorder dumps -> `collectives`.

A dump is what `torch._C._distributed_c10d._dump_nccl_trace()` returns (a pickle) or its
JSON twin (`_dump_nccl_trace_json`), one per rank, as written to
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>` with `TORCH_NCCL_TRACE_BUFFER_SIZE` set. Pickles
are read only through `safe_pickle` (no globals, ever).

What lands in the table, and why:
  - enqueue_ns = time_created_ns: the host's CLOCK_REALTIME when the op was enqueued.
  - gpu_duration_ns = duration_ms: CUDA events around the op on its NCCL stream; present
    only with TORCH_NCCL_ENABLE_TIMING=1.
  - gpu_start_ns / gpu_end_ns stay null: time_discovered_* are when the watchdog thread
    noticed the events (it polls), not when the GPU reached them.
  - pg_id = the process group's name (torch's guid, the same on every member rank),
    pg_name = its description, group_ranks = its global ranks from pg_config. The numeric
    FR pg_id is a per-process counter and is not kept. comm_hash stays null: entries do not
    name their NCCL communicator.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import incident as incident_mod
from .. import bounds, safe_io
from ..errors import InputError, StallcaseError
from ..safe_pickle import MAX_BYTES, loads_restricted
from ..tables import conform

PRODUCER = "torch-fr-import"
P2P_OPS = frozenset({"send", "recv"})
# output_sizes/output_dtypes are later additions to the format; older dumps lack them.
_REQUIRED = ("record_id", "process_group", "collective_seq_id", "profiling_name", "time_created_ns",
             "input_sizes", "state")
_RANK_IN_NAME = (re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE), re.compile(r"(\d+)(?:\.[A-Za-z]+)*$"))
_RANKS_STR = re.compile(r"^\s*\[\s*(\d+\s*(,\s*\d+\s*)*)?\]\s*$")
_INT64_MAX = (1 << 63) - 1


def read_dump(path: str | os.PathLike) -> dict:
    """Parse one dump (JSON or pickle, by content) into a dict; InputError naming the file otherwise."""
    path = Path(path)
    data = safe_io.read_regular(path, max_bytes=MAX_BYTES)  # no FIFO, device or sparse giant
    if data.lstrip()[:1] == b"{":
        try:
            dump = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InputError(path, f"not valid JSON ({str(exc).splitlines()[0][:160]})") from None
    else:
        dump = loads_restricted(data, path)
    if not isinstance(dump, dict):
        raise InputError(path, f"expected a flight-recorder dump (a dict), found {type(dump).__name__}")
    for key in ("version", "pg_config"):
        if key not in dump:
            raise InputError(path, f"not a flight-recorder dump: no '{key}' key")
    if not isinstance(dump["pg_config"], dict):
        raise InputError(path, "pg_config is not a mapping")
    entries = dump.get("entries", [])  # the JSON dump omits 'entries' when there are none
    if not isinstance(entries, list):
        raise InputError(path, "entries is not a list")
    return dump


def rank_of(path: str | os.PathLike, dump: dict) -> int:
    """The dump's rank: its own 'rank' key when present, else the file name (`..._rank3`, `...3`)."""
    named = None
    for pattern in _RANK_IN_NAME:
        m = pattern.search(Path(path).name)
        if m:
            named = bounds.rank(bounds.decimal_id(m.group(1), "the rank in the file name", path), "the rank in the file name", path)
            break
    own = dump.get("rank")
    if own is not None:
        bounds.rank(own, "dump's 'rank'", path)
    if own is not None and named is not None and own != named:
        raise InputError(path, f"dump says rank {own} but the file name says rank {named}")
    rank = own if own is not None else named
    if rank is None:
        raise InputError(path, "cannot tell the rank: no 'rank' in the dump and no trailing number in the file name (name it like nccl_trace_rank_3)")
    return rank


def _group_ranks(pg_config: dict, where: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name, cfg in pg_config.items():
        if not isinstance(cfg, dict):
            raise InputError(where, f"pg_config[{name!r}] is not a mapping")
        ranks = cfg.get("ranks")
        if isinstance(ranks, str):
            if not _RANKS_STR.match(ranks):
                raise InputError(where, f"pg_config[{name!r}].ranks is {ranks[:80]!r}, expected a list like '[0, 1]'")
            ranks = [int(x) for x in re.findall(r"\d+", ranks)]
        if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
            raise InputError(where, f"pg_config[{name!r}].ranks is not a list of ranks")
        out[str(cfg.get("name", name))] = ranks
    return out


def _is_sizes(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(
        isinstance(s, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in s) for s in v)


def _check_entry(i: int, e: Any, where: Path) -> None:
    if not isinstance(e, dict):
        raise InputError(where, f"entry {i} is a {type(e).__name__}, expected a mapping")
    missing = [k for k in _REQUIRED if k not in e]
    if missing:
        raise InputError(where, f"entry {i} lacks {', '.join(missing)}")
    pg = e["process_group"]
    if not (isinstance(pg, (list, tuple)) and len(pg) == 2 and all(isinstance(x, str) for x in pg)):
        raise InputError(where, f"entry {i}: process_group is {bounds.show(pg)}, expected a [name, desc] pair")
    bounds.text(pg[0], f"entry {i}: process_group name", where)
    bounds.text(pg[1], f"entry {i}: process_group description", where)
    for k in ("record_id", "collective_seq_id", "time_created_ns"):
        bounds.seq(e[k], f"entry {i}: {k}", where)
    if e.get("p2p_seq_id") is not None:
        bounds.seq(e["p2p_seq_id"], f"entry {i}: p2p_seq_id", where)
    for k in ("input_dtypes", "output_dtypes"):
        v = e.get(k)
        if v is not None and not (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)):
            raise InputError(where, f"entry {i}: {k} is {bounds.show(v)}, expected a list of dtype names")
    for k in ("profiling_name", "state"):
        if isinstance(e.get(k), str):
            bounds.text(e[k], f"entry {i}: {k}", where)

    if not isinstance(e["profiling_name"], str) or ":" not in e["profiling_name"]:
        raise InputError(where, f"entry {i}: profiling_name {e['profiling_name']!r} is not like 'nccl:all_reduce'")
    for k in ("input_sizes", "output_sizes"):
        if k in e and not _is_sizes(e[k]):
            raise InputError(where, f"entry {i}: {k} is not a list of shapes")
    d = e.get("duration_ms")
    if d is not None and (not isinstance(d, (int, float)) or isinstance(d, bool) or not d >= 0 or d > 1e9):
        raise InputError(where, f"entry {i}: duration_ms is {d!r}, expected a non-negative number")


def _thread_id(v: Any) -> int | None:
    # FR writes std::thread::id as a decimal string; keep it when it fits the column.
    if isinstance(v, int) and not isinstance(v, bool):
        return v if 0 <= v <= _INT64_MAX else None
    if isinstance(v, str) and v.isdigit() and int(v) <= _INT64_MAX:
        return int(v)
    return None


def _op_type(e: dict) -> str:
    name = e["profiling_name"].split(":", 1)[1].split(" ", 1)[0]
    # The closing 'coalesced' record of a p2p batch shares a collective seq id with real
    # collectives; name it apart so matching treats it as p2p.
    return "coalesced_p2p" if name == "coalesced" and e.get("is_p2p") else name


def dump_table(dump: dict, rank: int, where: Path) -> pa.Table:
    """The `collectives` rows of one rank's dump."""
    entries = dump.get("entries", [])
    for i, e in enumerate(entries):
        _check_entry(i, e, where)
    members = _group_ranks(dump["pg_config"], where)
    pg = [e["process_group"][0] for e in entries]
    ranks_of = [members.get(p) for p in pg]
    dur = [e.get("duration_ms") for e in entries]
    return conform("collectives", pa.table({
        "rank": pa.array([rank] * len(entries), pa.int32()),
        "pg_id": pa.array(pg, pa.string()),
        "pg_name": pa.array([e["process_group"][1] for e in entries], pa.string()),
        "comm_hash": pa.nulls(len(entries), pa.string()),
        "seq_id": pa.array([e["collective_seq_id"] for e in entries], pa.int64()),
        "p2p_seq_id": pa.array([e.get("p2p_seq_id") for e in entries], pa.int64()),
        "op_type": pa.array([_op_type(e) for e in entries], pa.string()),
        "input_sizes": pa.array([json.dumps(e["input_sizes"]) for e in entries], pa.string()),
        "output_sizes": pa.array([json.dumps(e["output_sizes"]) if "output_sizes" in e else None for e in entries], pa.string()),
        "dtypes": pa.array([json.dumps({"input": list(e.get("input_dtypes") or []), "output": list(e.get("output_dtypes") or [])})
                            for e in entries], pa.string()),
        "group_size": pa.array([len(r) if r is not None else None for r in ranks_of], pa.int32()),
        "group_ranks": pa.array([json.dumps(r) if r is not None else None for r in ranks_of], pa.string()),
        "enqueue_ns": pa.array([e["time_created_ns"] for e in entries], pa.int64()),
        "gpu_start_ns": pa.nulls(len(entries), pa.int64()),
        "gpu_end_ns": pa.nulls(len(entries), pa.int64()),
        "state": pa.array([str(e["state"]) for e in entries], pa.string()),
        "thread_id": pa.array([_thread_id(e.get("thread_id")) for e in entries], pa.int64()),
        "record_id": pa.array([e["record_id"] for e in entries], pa.int64()),
        "gpu_duration_ns": pa.array([round(d * 1e6) if d is not None else None for d in dur], pa.int64()),
    }), where)


def _dump_detail(path: Path, dump: dict, table: pa.Table) -> dict:
    rec = table["record_id"].to_pylist()
    return {
        "file": str(path),
        "version": str(dump.get("version")),
        "comm_lib_version": str(dump.get("comm_lib_version", "")),
        "entries": table.num_rows,
        "first_record_id": min(rec) if rec else None,
        "last_record_id": max(rec) if rec else None,
        # record ids start at 0 per process; a first id above 0 means the ring buffer wrapped.
        "wrapped": bool(rec) and min(rec) > 0,
        "with_gpu_duration": table["gpu_duration_ns"].null_count < table.num_rows,
    }


def _shift(table: pa.Table, delta_ns: int, where=None) -> pa.Table:
    try:  # checked: a hostile offset must not wrap an int64 time into a negative one
        col = pc.subtract_checked(table["enqueue_ns"], pa.scalar(bounds.integer(delta_ns, "clock.unix_minus_host_ns", where), pa.int64()))
    except pa.ArrowInvalid:
        raise InputError(where, "placing the dumps' times on the incident's clock overflows int64 (clock.unix_minus_host_ns)") from None
    if col.null_count < len(col) and pc.min(col).as_py() < 0:
        raise InputError(where, "the incident's clock.unix_minus_host_ns puts flight-recorder times before time 0")
    return table.set_column(table.schema.get_field_index("enqueue_ns"), "enqueue_ns", col)


def import_torch_fr(files: list[str | os.PathLike], *, incident_id: str, incidents_dir: str | os.PathLike = "incidents") -> Path:
    """Read one dump per rank and write (or merge into) the incident's `collectives` table."""
    if not files:
        raise StallcaseError("files", "no flight-recorder dumps given")
    out = incident_mod.incident_dir(incidents_dir, incident_id)
    per_rank: dict[int, tuple[Path, dict, pa.Table]] = {}
    bounds.unique_files(files)
    for f in files:
        path = Path(f)
        dump = read_dump(path)
        rank = rank_of(path, dump)
        if rank in per_rank:
            raise InputError(path, f"a second dump for rank {rank} (first: {per_rank[rank][0]})")
        per_rank[rank] = (path, dump, dump_table(dump, rank, path))

    existing = incident_mod.read_incident(out) if (out / incident_mod.MANIFEST).is_file() else None
    tables = dict(existing.tables) if existing else {}
    manifest = {k: v for k, v in existing.manifest.items() if k != "tables"} if existing else {
        "incident_id": incident_id, "reason": "import", "producer": PRODUCER,
        "clock": {"host": "realtime", "unix_minus_host_ns": 0}, "sources": {},
    }
    clock = manifest["clock"]
    delta_ns = 0
    if clock["host"] != "realtime":
        # FR times are CLOCK_REALTIME; place them on the incident's timeline.
        if clock.get("unix_minus_host_ns") is None:
            raise InputError(out / incident_mod.MANIFEST, "incident's host clock is not realtime and has no unix_minus_host_ns, so flight-recorder times cannot be placed on it")
        delta_ns = int(clock["unix_minus_host_ns"])
    new = pa.concat_tables([t if not delta_ns else _shift(t, delta_ns, out / incident_mod.MANIFEST)
                            for _, _, t in (per_rank[r] for r in sorted(per_rank))])
    if "collectives" in tables:
        # Re-importing a rank replaces its rows; other ranks' rows stay.
        old = tables["collectives"]
        keep = pc.invert(pc.is_in(old["rank"], value_set=pa.array(sorted(per_rank), pa.int32())))
        new = pa.concat_tables([old.filter(keep), new])
    tables["collectives"] = new

    dumps = dict(manifest["sources"].get("torch_fr", {}).get("detail", {}).get("dumps", {}))
    dumps.update({str(r): _dump_detail(p, d, t) for r, (p, d, t) in per_rank.items()})
    manifest["sources"] = dict(manifest["sources"])
    manifest["sources"]["torch_fr"] = incident_mod.source("observed", None, dumps=dumps)
    with_duration = any(d["with_gpu_duration"] for d in dumps.values())
    manifest["sources"]["collective_gpu_duration"] = (
        incident_mod.source("observed", None) if with_duration else
        incident_mod.source("not_observed", "no duration_ms in the flight-recorder dumps (run with TORCH_NCCL_ENABLE_TIMING=1)"))
    manifest["ranks"] = sorted(set(manifest.get("ranks", [])) | set(per_rank))
    manifest.setdefault("created_unix_ns", time.time_ns())
    incident_mod.write_incident(out, manifest, tables)
    return out
