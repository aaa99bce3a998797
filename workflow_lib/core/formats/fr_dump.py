"""One PyTorch NCCL flight-recorder dump: parse, check, and turn into `collectives` rows and counters.

Both the importer (`stallcase import torch-fr`) and the recorder's in-process source
(capture/sources/collectives.py) read dumps here, so a dump means the same wherever it
came from. A dump is what `torch._C._distributed_c10d._dump_nccl_trace()` returns (a
pickle, read only through `safe_pickle`) or its JSON twin (`_dump_nccl_trace_json`).

Keys by dump version (torch's `version_val`; minor bumps add fields):
  entries     record_id, pg_id (a per-process counter), process_group (name, desc),
              collective_seq_id, p2p_seq_id, op_id, profiling_name, time_created_ns
              (CLOCK_REALTIME), input/output sizes and dtypes, state (scheduled | started
              | completed, as the watchdog last saw the CUDA events), duration_ms (with
              TORCH_NCCL_ENABLE_TIMING=1), time_discovered_*; thread_id/thread_name later.
              The JSON dump omits `entries` when there are none; an `onlyActive` dump
              leaves completed entries out.
  pg_config   name -> {name, desc, ranks} (ranks as the string "[0, 1]")
  pg_status   str(pg_id) -> last_enqueued_collective, last_started_collective,
              last_completed_collective (2.3 on; ints in a pickle, strings in JSON; -1 =
              none yet; started stays -1 without TORCH_NCCL_ENABLE_TIMING). Enqueued is
              bumped after the NCCL call returned, so a thread stuck inside the call still
              shows the previous op while its entry is already recorded.
  NCCL        `nccl_version` (2.7-2.9), `comm_lib_version` (2.10 on)

pg_status is keyed by the numeric pg_id, entries by both: a group's counters are mapped
to its name through the entries; a group with no entry left in the dump is mapped only
when its name is the pg_id itself (how torch names groups by default), and says so.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import bounds, safe_io
from ..errors import InputError
from ..safe_pickle import MAX_BYTES, loads_restricted
from ..tables import conform

# output_sizes/output_dtypes are later additions to the format; older dumps lack them.
_REQUIRED = ("record_id", "process_group", "collective_seq_id", "profiling_name", "time_created_ns",
             "input_sizes", "state")
_RANK_IN_NAME = (re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE), re.compile(r"(\d+)(?:\.[A-Za-z]+)*$"))
_RANKS_STR = re.compile(r"^\s*\[\s*(\d+\s*(,\s*\d+\s*)*)?\]\s*$")
_INT64_MAX = (1 << 63) - 1
COUNTERS = {"last_enqueued_collective": "last_enqueued", "last_started_collective": "last_started",
            "last_completed_collective": "last_completed"}
NCCL_VERSION_KEYS = ("comm_lib_version", "nccl_version")
STATES = ("scheduled", "started", "completed")


def read_dump(path: str | os.PathLike) -> dict:
    """Parse one dump file (JSON or pickle, by content) into a dict; InputError naming the file otherwise."""
    path = Path(path)
    data = safe_io.read_regular(path, max_bytes=MAX_BYTES)  # no FIFO, device or sparse giant
    return parse_dump(data, path)


def parse_dump(data: bytes, where: str | os.PathLike) -> dict:
    """The dump in `data` (JSON or pickle bytes) as a checked dict."""
    if data.lstrip()[:1] == b"{":
        try:
            dump = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InputError(where, f"not valid JSON ({str(exc).splitlines()[0][:160]})") from None
    else:
        dump = loads_restricted(data, where)
    if not isinstance(dump, dict):
        raise InputError(where, f"expected a flight-recorder dump (a dict), found {type(dump).__name__}")
    for key in ("version", "pg_config"):
        if key not in dump:
            raise InputError(where, f"not a flight-recorder dump: no '{key}' key")
    if not isinstance(dump["pg_config"], dict):
        raise InputError(where, "pg_config is not a mapping")
    if not isinstance(dump.get("entries", []), list):  # the JSON dump omits 'entries' when there are none
        raise InputError(where, "entries is not a list")
    if not isinstance(dump.get("pg_status", {}), dict):
        raise InputError(where, "pg_status is not a mapping")
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


def group_ranks(pg_config: dict, where: str | os.PathLike) -> dict[str, list[int]]:
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


def _check_entry(i: int, e: Any, where) -> None:
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
    pid = e.get("pg_id")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid < 0 or pid > _INT64_MAX):
        raise InputError(where, f"entry {i}: pg_id is {pid!r}, expected a non-negative integer")
    if not isinstance(e["profiling_name"], str) or ":" not in e["profiling_name"]:
        raise InputError(where, f"entry {i}: profiling_name {bounds.show(e['profiling_name'])} is not like 'nccl:all_reduce'")
    if str(e["state"]) not in STATES:
        raise InputError(where, f"entry {i}: state is {e['state']!r}, expected one of {', '.join(STATES)}")
    for k in ("input_sizes", "output_sizes"):
        if k in e and not _is_sizes(e[k]):
            raise InputError(where, f"entry {i}: {k} is not a list of shapes")
    d = e.get("duration_ms")
    if d is not None and (not isinstance(d, (int, float)) or isinstance(d, bool) or not d >= 0 or d > 1e9):
        raise InputError(where, f"entry {i}: duration_ms is {d!r}, expected a non-negative number")


def check_entries(dump: dict, where) -> list[dict]:
    entries = dump.get("entries", [])
    for i, e in enumerate(entries):
        _check_entry(i, e, where)
    return entries


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


def _sizes_json(v: list) -> str:
    # A list of lists of ints prints as JSON already (str is C-fast); anything else via json.
    if type(v) is list and all(type(s) is list for s in v):
        return str(v)
    return json.dumps(v)


def _dtypes_json(e: dict, cache: dict) -> str:
    key = (tuple(e.get("input_dtypes") or ()), tuple(e.get("output_dtypes") or ()))
    if key not in cache:
        cache[key] = json.dumps({"input": list(key[0]), "output": list(key[1])})
    return cache[key]


def dump_table(dump: dict, rank: int, where) -> pa.Table:
    """The `collectives` rows of one rank's dump."""
    entries = check_entries(dump, where)
    members = group_ranks(dump["pg_config"], where)
    pg = [e["process_group"][0] for e in entries]
    ranks_of = [members.get(p) for p in pg]
    dur = [e.get("duration_ms") for e in entries]
    members_json = {p: json.dumps(r) for p, r in members.items()}
    dtypes_cache: dict = {}
    return conform("collectives", pa.table({
        "rank": pa.array([rank] * len(entries), pa.int32()),
        "pg_id": pa.array(pg, pa.string()),
        "pg_name": pa.array([e["process_group"][1] for e in entries], pa.string()),
        "comm_hash": pa.nulls(len(entries), pa.string()),
        "seq_id": pa.array([e["collective_seq_id"] for e in entries], pa.int64()),
        "p2p_seq_id": pa.array([e.get("p2p_seq_id") for e in entries], pa.int64()),
        "op_type": pa.array([_op_type(e) for e in entries], pa.string()),
        "input_sizes": pa.array([_sizes_json(e["input_sizes"]) for e in entries], pa.string()),
        "output_sizes": pa.array([_sizes_json(e["output_sizes"]) if "output_sizes" in e else None for e in entries], pa.string()),
        "dtypes": pa.array([_dtypes_json(e, dtypes_cache) for e in entries], pa.string()),
        "group_size": pa.array([len(r) if r is not None else None for r in ranks_of], pa.int32()),
        "group_ranks": pa.array([members_json.get(p) for p in pg], pa.string()),
        "enqueue_ns": pa.array([e["time_created_ns"] for e in entries], pa.int64()),
        "gpu_start_ns": pa.nulls(len(entries), pa.int64()),
        "gpu_end_ns": pa.nulls(len(entries), pa.int64()),
        "state": pa.array([str(e["state"]) for e in entries], pa.string()),
        "thread_id": pa.array([_thread_id(e.get("thread_id")) for e in entries], pa.int64()),
        "record_id": pa.array([e["record_id"] for e in entries], pa.int64()),
        "gpu_duration_ns": pa.array([round(d * 1e6) if d is not None else None for d in dur], pa.int64()),
    }), where)


def _counter(v: Any, where, field: str) -> int | None:
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,19}", v.strip()):
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < -1 or v > _INT64_MAX:
        raise InputError(where, f"pg_status {field} is {v!r}, expected an integer >= -1")
    return None if v < 0 else v


def group_counters(dump: dict, where) -> tuple[dict[str, dict], list[str]]:
    """({group name: {pg_id, last_enqueued, last_started, last_completed, mapped_by}}, unmapped pg_ids).

    A counter of -1 (nothing yet, or started without timing) is None.
    """
    entries = dump.get("entries", [])
    by_id: dict[int, str] = {}
    for e in entries:
        pid = e.get("pg_id")
        if pid is not None:
            by_id.setdefault(int(pid), e["process_group"][0])
    names = set(group_ranks(dump["pg_config"], where))
    claimed = set(by_id.values())
    out: dict[str, dict] = {}
    unmapped: list[str] = []
    for key, st in dump.get("pg_status", {}).items():
        if not isinstance(st, dict):
            raise InputError(where, f"pg_status[{key!r}] is not a mapping")
        try:
            pid = int(key)
        except (TypeError, ValueError):
            raise InputError(where, f"pg_status key {key!r} is not a process-group id") from None
        c = {short: _counter(st[long], where, f"[{key!r}].{long}") if long in st else None for long, short in COUNTERS.items()}
        if pid in by_id:
            name, how = by_id[pid], "entries"
        elif str(pid) in names and str(pid) not in claimed:
            name, how = str(pid), "name"  # torch names groups "0", "1", ... in creation order by default
        else:
            unmapped.append(str(key))
            continue
        out[name] = {"pg_id": pid, **c, "mapped_by": how}
    return out, sorted(unmapped)


def nccl_version(dump: dict) -> str | None:
    for k in NCCL_VERSION_KEYS:
        v = dump.get(k)
        if isinstance(v, (str, int, float)) and str(v).strip():
            return str(v).strip()[:64]
    return None


def _wrapped(entries: list[dict], counters: dict[str, dict]) -> tuple[bool, str]:
    """Did the ring buffer overwrite entries? (bool, why), from record ids and counters.

    Record ids start at 0 per process. A full dump whose first id is above 0 lost its
    oldest entries. A dump with no completed entry may be an `onlyActive` dump, which
    leaves completed entries out on purpose: it wrapped only if some group's counters
    show an op that was enqueued, never completed, and is not in the dump.
    """
    if not entries:
        return False, "no entries"
    first = min(e["record_id"] for e in entries)
    if first == 0:
        return False, "first record id is 0"
    if any(str(e["state"]) == "completed" for e in entries):
        return True, f"first record id is {first} and completed entries are kept: older entries were overwritten"
    lo: dict[str, int] = {}
    for e in entries:
        g = e["process_group"][0]
        lo[g] = min(lo.get(g, e["collective_seq_id"]), e["collective_seq_id"])
    for g, first_seq in sorted(lo.items()):
        c = counters.get(g, {}).get("last_completed")
        if c is not None and c < first_seq - 1:
            return True, f"group {g}: ops {c + 1}..{first_seq - 1} were enqueued, not completed, and are not in the dump"
    if all(counters.get(g, {}).get("last_completed") is not None for g in lo):
        return False, "only pending entries (an onlyActive dump): every op before them completed per pg_status"
    return False, "only pending entries and no pg_status to tell a wrap from an onlyActive dump; not taken as wrapped"


def dump_detail(dump: dict, table: pa.Table, where, *, file: str | None = None, hostname: str | None = None) -> dict:
    """What the manifest keeps about one rank's dump: versions, counters, window, wrap."""
    entries = dump.get("entries", [])
    counters, unmapped = group_counters(dump, where)
    rec = table["record_id"].to_pylist()
    wrapped, why = _wrapped(entries, counters)
    states = table["state"].to_pylist()
    return {
        "file": file,
        "version": str(dump.get("version")),
        "comm_lib_version": nccl_version(dump) or "",
        "entries": table.num_rows,
        "first_record_id": min(rec) if rec else None,
        "last_record_id": max(rec) if rec else None,
        "wrapped": wrapped,
        "wrapped_reason": why,
        "pending_only": bool(states) and "completed" not in states,
        "groups": counters,
        "unmapped_pg_status": unmapped,
        "hostname": hostname,
        "with_gpu_duration": table["gpu_duration_ns"].null_count < table.num_rows,
    }


def versions(details: dict[str, dict]) -> dict:
    """NCCL and dump versions over several ranks' dump details (one value, or all that differ)."""
    def one(key):
        vals = sorted({d.get(key) for d in details.values() if d.get(key)})
        return vals[0] if len(vals) == 1 else (vals or None)
    return {"nccl_version": one("comm_lib_version"), "dump_version": one("version")}
