"""Several ranks recording under one incident id keep every rank: a rank-merged incident.

Each rank's recorder snapshots into `<incidents_dir>/<id>/` like a single process would.
Under a file lock beside it (`.<id>.lock`), a rank that finds the directory holding other
ranks merges into it: tables are concatenated (every row carries its rank), the manifest
lists every rank, and each source's and the recorder's per-rank entries are kept under
`by_rank`. The merged incident is written to a temporary sibling and swapped in, so a
reader sees the old complete incident or the new one. A rank that is already in the
directory (a later run, or a second snapshot) goes to the first of `<id>.2`, `<id>.3`, ...
that does not hold it, so the ranks of one run land together. Ranks on different hosts
never merge: their monotonic clocks are different timelines; such a rank's snapshot goes
to `<id>.rank<r>` and the recorder's errors say so, naming the rank. Nothing is
overwritten silently.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from ..core import tables as T
from ..core.errors import StallcaseError
from ..core.incident import MANIFEST, read_incident

MAX_SLOTS = 1000


@contextmanager
def _locked(base: Path, incident_id: str):
    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base / f".{incident_id}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _slots(root_id: str, first: str):
    """Directory names to try, from `first` on: id, id.2, id.3, ..."""
    n = 1 if first == root_id else int(first.rsplit(".", 1)[1])
    for k in range(n, n + MAX_SLOTS):
        yield root_id if k == 1 else f"{root_id}.{k}"


def _host(manifest: dict) -> str | None:
    return (manifest.get("provenance") or {}).get("hostname")


def write_rank(path: Path, manifest: dict, table_data: dict[str, pa.Table], *, root_id: str, write) -> Path:
    """Write one rank's snapshot (`manifest["ranks"] == [rank]`) with `write(path, manifest, tables)`,
    merging into the ranks already there. Returns the incident directory written."""
    path = Path(path)
    base = path.parent
    (rank,) = manifest["ranks"]
    with _locked(base, root_id):
        for name in _slots(root_id, path.name):
            target = base / name
            if not (target / MANIFEST).exists():
                write(target, dict(manifest, incident_id=name), table_data)
                return target
            old = read_incident(target)
            old_ranks = old.manifest.get("ranks") or []
            if rank in old_ranks or not old_ranks:
                continue  # this rank (or a single-process incident) is there: never overwrite it
            if _host(old.manifest) != _host(manifest):
                target = base / f"{root_id}.rank{rank}"
                if (target / MANIFEST).exists():
                    raise StallcaseError(target, f"rank {rank}: already written; not overwritten")
                write(target, dict(manifest, incident_id=target.name), table_data)
                raise Relocated(target, f"rank {rank} on host {_host(manifest)} cannot join incident {name} of host "
                                         f"{_host(old.manifest)} (different monotonic clocks): written to {target.name}")
            merged_manifest, merged_tables = merge(old.manifest, old.tables, manifest, table_data, name)
            tmp = base / f".{name}.merge-{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            write(tmp, merged_manifest, merged_tables)
            trash = base / f".{name}.old-{os.getpid()}"
            os.rename(target, trash)
            os.rename(tmp, target)
            shutil.rmtree(trash, ignore_errors=True)
            return target
    raise StallcaseError(base / root_id, f"rank {rank}: {MAX_SLOTS} incidents named {root_id}.* already hold rank {rank}; not overwritten")


class Relocated(Exception):
    """The snapshot was written, but not where the other ranks are."""

    def __init__(self, path: Path, message: str):
        super().__init__(message)
        self.path = path


def _per_rank(entry: dict | None, ranks: list[int], fields) -> dict:
    """An entry's per-rank values: its `by_rank` once merged, else the entry for each of `ranks`."""
    if entry is None:
        return {}
    if "by_rank" in entry:
        return dict(entry["by_rank"])
    return {str(r): fields(entry) for r in ranks}


def _status(entry: dict) -> dict:
    return {"status": entry["status"], "reason": entry["reason"],
            **{k: v for k, v in entry["detail"].items() if k != "by_rank"}}


def merge(old_m: dict, old_t: dict[str, pa.Table], new_m: dict, new_t: dict[str, pa.Table], name: str):
    """(manifest without `tables`, tables) of both ranks' data."""
    old_ranks, new_ranks = list(old_m.get("ranks") or []), list(new_m["ranks"])
    keep = {k: v for k, v in old_m.items() if k not in ("tables", "tables_version", "created_unix_ns", "schema_version", "kind")}
    m = dict(keep, incident_id=name, ranks=sorted(set(old_ranks) | set(new_ranks)))
    ow, nw = old_m.get("window") or {}, new_m.get("window") or {}
    if ow and nw:
        m["window"] = {"start_ns": min(ow["start_ns"], nw["start_ns"]), "end_ns": max(ow["end_ns"], nw["end_ns"])}
    sources = {}
    for src in sorted(set(old_m["sources"]) | set(new_m["sources"])):
        o, n = old_m["sources"].get(src), new_m["sources"].get(src)
        per = {}
        if o is not None:
            per = dict(o["detail"]["by_rank"]) if "by_rank" in o["detail"] else {str(r): _status(o) for r in old_ranks}
        if n is not None:
            per[str(new_ranks[0])] = _status(n)
        first = o or n
        observed = any(v.get("status") == "observed" for v in per.values())
        detail = {k: v for k, v in first["detail"].items() if k != "by_rank"}
        detail["by_rank"] = per
        missing = sorted(r for r, v in per.items() if v.get("status") != "observed")
        if observed and missing:
            detail["not_observed_on_ranks"] = missing
        sources[src] = {"status": "observed" if observed else "not_observed",
                        "reason": None if observed else first["reason"], "detail": detail}
    m["sources"] = sources
    seen = {(a["role"], a["path"], a["digest"]) for a in old_m.get("artifacts") or []}
    m["artifacts"] = list(old_m.get("artifacts") or []) + [a for a in new_m.get("artifacts") or []
                                                            if (a["role"], a["path"], a["digest"]) not in seen]
    orec, nrec = old_m.get("recorder"), new_m.get("recorder")
    if orec is not None or nrec is not None:
        per = _per_rank(orec, old_ranks, lambda e: e)
        if nrec is not None:
            per[str(new_ranks[0])] = nrec
        m["recorder"] = dict({k: v for k, v in (orec or nrec).items() if k != "by_rank"}, by_rank=per)
    merged = {}
    for tname in sorted(set(old_t) | set(new_t)):
        parts = [T.conform(tname, t) for t in (old_t.get(tname), new_t.get(tname)) if t is not None]
        merged[tname] = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    return m, merged
