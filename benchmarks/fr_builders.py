"""Small builders for synthetic NCCL flight-recorder dumps, in the key layout torch writes.

`entry()` makes one record, `dump()` one rank's dump, and `job()` simulates a
data-parallel loop: each step every rank enqueues collectives; a late rank delays its
enqueue, and every other rank's collective lasts that much longer on the GPU
(the CUDA-event duration the flight recorder keeps as duration_ms).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path

MS = 1_000_000
T0_NS = 1_764_460_800_000_000_000  # 2025-11-30T00:00:00Z, realtime like FR's time_created_ns
TRANSFER_NS = 200_000  # 0.2 ms of pure transfer once every rank has arrived


def entry(record_id: int, seq: int, t_ns: int, *, pg: str = "0", desc: str = "default_pg", op: str = "all_reduce",
          duration_ms: float | None = None, sizes=((1024,),), dtype: str = "Float", state: str = "completed",
          p2p_seq: int = 0, op_id: int | None = None, thread_id: str = "140245023", is_p2p: bool = False) -> dict:
    shapes = [list(s) for s in sizes]
    e = {
        "record_id": record_id, "pg_id": int(pg) if pg.isdigit() else 7, "process_group": (pg, desc),
        "collective_seq_id": seq, "p2p_seq_id": p2p_seq, "op_id": op_id if op_id is not None else seq,
        "profiling_name": f"nccl:{op}", "time_created_ns": t_ns,
        "time_discovered_started_ns": t_ns + 10 * MS if state != "scheduled" else None,
        "time_discovered_completed_ns": t_ns + 20 * MS if state == "completed" else None,
        "input_sizes": shapes, "output_sizes": [list(s) for s in shapes],
        "input_dtypes": [dtype] * len(shapes), "output_dtypes": [dtype] * len(shapes),
        "state": state, "thread_id": thread_id, "thread_name": "pt_main_thread", "retired": state == "completed",
        "timeout_ms": 600000, "is_p2p": is_p2p, "frames": [],
    }
    if duration_ms is not None:
        e["duration_ms"] = duration_ms
    return e


def counters_of(entries: list[dict], *, timing: bool = True) -> dict[str, dict[str, int]]:
    """pg_status as torch keeps it: per numeric pg_id, the last enqueued/started/completed collective seq (-1: none)."""
    out: dict[str, dict[str, int]] = {}
    for e in entries:
        if e.get("is_p2p") or not isinstance(e, dict) or "collective_seq_id" not in e or "pg_id" not in e:
            continue
        c = out.setdefault(str(e["pg_id"]), {"last_enqueued_collective": -1, "last_started_collective": -1,
                                              "last_completed_collective": -1})
        s = e["collective_seq_id"]
        c["last_enqueued_collective"] = max(c["last_enqueued_collective"], s)
        if timing and e["state"] in ("started", "completed"):
            c["last_started_collective"] = max(c["last_started_collective"], s)
        if e["state"] == "completed":
            c["last_completed_collective"] = max(c["last_completed_collective"], s)
    return out


def dump(entries: list[dict], groups: dict[str, tuple[str, list[int]]] | None = None, *, version: str = "2.10",
         rank: int | None = None, pending_only: bool = False, pg_status: dict | None = None,
         counters_from: list[dict] | None = None) -> dict:
    """One rank's dump. pg_status is computed from `counters_from` (default: `entries`, before any
    ring-buffer cut) unless given; `pending_only` leaves completed entries out, as onlyActive does."""
    groups = groups or {"0": ("default_pg", [0, 1])}
    status = pg_status if pg_status is not None else counters_of(counters_from if counters_from is not None else entries)
    d = {
        "version": version,
        "pg_config": {name: {"name": name, "desc": desc, "ranks": "[" + ", ".join(map(str, ranks)) + "]"}
                      for name, (desc, ranks) in groups.items()},
        "comm_lib_version": "2.27.7",
        "pg_status": status,
        "entries": [e for e in entries if not (pending_only and e["state"] == "completed")],
    }
    if rank is not None:
        d["rank"] = rank
    return d


def to_json(d: dict) -> dict:
    """The JSON dump's differences: pairs are lists, absent discovery times are 0, status values strings."""
    out = json.loads(json.dumps(d))
    for e in out.get("entries", []):
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            e[k] = e[k] or 0
    out["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in out["pg_status"].items()}
    return out


def cut(d: dict, entries: list[dict]) -> dict:
    """A rank that stopped: keep `entries` and recompute its pg_status from them."""
    d["entries"] = entries
    d["pg_status"] = counters_of(entries)
    return d


def write_dumps(directory: Path, dumps: dict[int, dict], *, fmt: str = "pickle", prefix: str = "nccl_trace_rank_") -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, d in sorted(dumps.items()):
        p = directory / f"{prefix}{rank}{'.json' if fmt == 'json' else ''}"
        if fmt == "json":
            p.write_text(json.dumps(to_json(d)))
        else:
            p.write_bytes(pickle.dumps(d, protocol=2))
        paths.append(p)
    return paths


@dataclass
class Job:
    """A simulated run: dumps per rank, steps per rank (realtime ns) and the injected truth."""

    dumps: dict[int, dict]
    steps: dict[int, list[tuple[int, int, int]]]
    late: dict[int, tuple[int, int]] = field(default_factory=dict)


def job(n_ranks: int = 2, n_steps: int = 30, *, late: dict[int, tuple[int, int]] | None = None,
        step_ns: int = 100 * MS, jitter_ns: int = 20_000, with_duration: bool = True,
        subgroup: list[int] | None = None, buffer: int | None = None, seq_offset: int = 0) -> Job:
    """Every step: one all_reduce on the world group, then (optionally) one on a sub-group.

    late = {step: (rank, delay_ns)}. Arrivals get a deterministic jitter below `jitter_ns`.
    `buffer` keeps only the last N entries per rank (a wrapped ring buffer); `seq_offset`
    starts sequence numbers later (ops before the window).
    """
    late = late or {}
    ranks = list(range(n_ranks))
    groups = {"0": ("default_pg", ranks)}
    if subgroup:
        groups["1"] = ("sub", list(subgroup))
    entries: dict[int, list[dict]] = {r: [] for r in ranks}
    steps: dict[int, list[tuple[int, int, int]]] = {r: [] for r in ranks}
    rec = {r: seq_offset for r in ranks}  # earlier ops had the earlier record ids
    for s in range(n_steps):
        base = T0_NS + s * step_ns
        arrive = {r: base + 1 * MS + ((s * 7919 + r * 104729) % max(jitter_ns, 1)) for r in ranks}
        if s in late:
            lr, delay = late[s]
            arrive[lr] += delay
        last = max(arrive.values())
        for r in ranks:
            steps[r].append((s, base, base + step_ns))
            dur = (TRANSFER_NS + last - arrive[r]) / MS if with_duration else None
            entries[r].append(entry(rec[r], seq_offset + s + 1, arrive[r], duration_ms=dur))
            rec[r] += 1
        if subgroup:
            # The sub-group op follows the world op on the GPU: everyone already waited there.
            sub_arrive = {r: arrive[r] + 50_000 for r in subgroup}
            for r in subgroup:
                entries[r].append(entry(rec[r], seq_offset + s + 1, sub_arrive[r], pg="1", desc="sub",
                                        duration_ms=TRANSFER_NS / MS if with_duration else None))
                rec[r] += 1
    dumps = {}
    for r in ranks:
        es = entries[r][-buffer:] if buffer else entries[r]
        dumps[r] = dump(es, groups, counters_from=entries[r])
    return Job(dumps=dumps, steps=steps, late=dict(late))


@dataclass
class Hang:
    """A hung (or slowed) job: dumps per rank, and the culprits it must be diagnosed with."""

    dumps: dict[int, dict]
    expected: list[tuple[int, str, str, int]]  # (rank, kind, pg name, seq), in collective order
    hang_seq: int | None                       # the world op the job hung on (None: it did not hang)


def _append(j: Job, r: int, seq: int, t_ns: int, state: str, *, pg: str = "0", desc: str = "default_pg",
            duration_ms: float | None = None) -> None:
    es = j.dumps[r]["entries"]
    rid = es[-1]["record_id"] + 1 if es else 0
    es.append(entry(rid, seq, t_ns, pg=pg, desc=desc, state=state, duration_ms=duration_ms))


def hang_job(n_ranks: int, scenario: str, culprit: int, *, n_steps: int = 20, pending_only: bool = False,
             subgroup: list[int] | None = None, second: int | None = None) -> Hang:
    """A data-parallel loop of `n_steps` completed world all_reduces, then one of:

    gpu_error      op h: every peer completed it; `culprit` enqueued it and it stays `started`
                   on its GPU. Everyone enqueued op h+1 (peers `started`, culprit `scheduled`).
    gil            `culprit` completed h-1 and never enqueued op h (its host is stuck: the GIL);
                   the peers enqueued op h and spin in it (`started`).
    never_enqueued `culprit` never recorded anything (an empty dump); the peers' first op is
                   pending (no healthy prefix).
    straggler      `culprit` enqueues step 5's op 300 ms late; everything completes.
    missing_dump   as `gil`, and `culprit`'s dump is missing.
    two_groups     as gpu_error on the world group for `culprit`, and later `second` never
                   enqueues the sub-group's next op (needs `subgroup` holding `second`).
    `pending_only` leaves completed entries out of every dump (onlyActive), counters kept.
    """
    ranks = list(range(n_ranks))
    if scenario == "straggler":
        j = job(n_ranks, n_steps, late={5: (culprit, 300 * MS)}, subgroup=subgroup)
        return Hang(_finish(j, pending_only), [(culprit, "late", "0", 6)], None)
    prefix = 0 if scenario == "never_enqueued" else n_steps
    j = job(n_ranks, max(prefix, 1), subgroup=subgroup)
    if prefix == 0:
        for r in ranks:
            j.dumps[r]["entries"] = []
    h = prefix + 1
    t = T0_NS + (prefix + 1) * 100 * MS
    peers = [r for r in ranks if r != culprit]
    if scenario in ("gpu_error", "two_groups"):
        for r in ranks:
            _append(j, r, h, t + r * 1000, "started" if r == culprit else "completed",
                    duration_ms=None if r == culprit else 0.3)
        for r in ranks:
            _append(j, r, h + 1, t + 2 * MS + r * 1000, "scheduled" if r == culprit else "started")
        expected = [(culprit, "stuck_on_device", "0", h)]
        if scenario == "two_groups":
            assert subgroup and second in subgroup and second != culprit
            sub_seq = prefix + 1
            for r in subgroup:
                if r != second:
                    _append(j, r, sub_seq, t + 5 * MS + r * 1000, "started", pg="1", desc="sub")
            expected.append((second, "never_joined", "1", sub_seq))
    elif scenario in ("gil", "missing_dump", "never_enqueued"):
        for r in peers:
            _append(j, r, h, t + r * 1000, "started")
        kind = {"gil": "never_joined", "never_enqueued": "never_joined", "missing_dump": "missing_dump"}[scenario]
        expected = [(culprit, kind, "0", h)]
    else:
        raise ValueError(scenario)
    dumps = _finish(j, pending_only)
    if scenario == "missing_dump":
        del dumps[culprit]
    if scenario == "never_enqueued":
        dumps[culprit]["pg_status"] = {}
    return Hang(dumps, expected, h)


def _finish(j: Job, pending_only: bool) -> dict[int, dict]:
    out = {}
    for r, d in j.dumps.items():
        full = d["entries"]
        out[r] = dict(d, pg_status=counters_of(full),
                      entries=[e for e in full if not (pending_only and e["state"] == "completed")])
    return out
