"""`stallcase import torch-fr DUMP... --incident ID`: PyTorch NCCL flight-recorder dumps -> `collectives`.

A dump is what `torch._C._distributed_c10d._dump_nccl_trace()` returns (a pickle) or its
JSON twin (`_dump_nccl_trace_json`), one per rank, as written to
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>` with `TORCH_NCCL_TRACE_BUFFER_SIZE` set. The
format is read in workflow_lib/core/formats/fr_dump.py (shared with the recorder's source).

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
What lands in the manifest (sources.torch_fr.detail): per rank the dump's version, NCCL
version, per-group pg_status counters, window and whether it wrapped; over all ranks the
NCCL and dump versions. Dumps carry no hostname: `hostname` says which host wrote them
(all the files of one call); without it each rank is its own clock domain.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..core import bounds
from ..core import incident as incident_mod
from ..core.formats.fr_dump import dump_detail, dump_table, rank_of, read_dump, versions
from ..core.errors import InputError, StallcaseError

PRODUCER = "torch-fr-import"
__all__ = ["import_torch_fr", "read_dump", "rank_of", "dump_table", "PRODUCER"]


def _shift(table: pa.Table, delta_ns: int, where=None) -> pa.Table:
    try:  # checked: a hostile offset must not wrap an int64 time into a negative one
        col = pc.subtract_checked(table["enqueue_ns"], pa.scalar(bounds.integer(delta_ns, "clock.unix_minus_host_ns", where), pa.int64()))
    except pa.ArrowInvalid:
        raise InputError(where, "placing the dumps' times on the incident's clock overflows int64 (clock.unix_minus_host_ns)") from None
    if col.null_count < len(col) and pc.min(col).as_py() < 0:
        raise InputError(where, "the incident's clock.unix_minus_host_ns puts flight-recorder times before time 0")
    return table.set_column(table.schema.get_field_index("enqueue_ns"), "enqueue_ns", col)


def import_torch_fr(files: list[str | os.PathLike], *, incident_id: str, incidents_dir: str | os.PathLike = "incidents",
                    hostname: str | None = None) -> Path:
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
    dumps.update({str(r): dump_detail(d, t, p, file=str(p), hostname=hostname) for r, (p, d, t) in per_rank.items()})
    manifest["sources"] = dict(manifest["sources"])
    manifest["sources"]["torch_fr"] = incident_mod.source("observed", None, dumps=dumps, **versions(dumps))
    with_duration = any(d["with_gpu_duration"] for d in dumps.values())
    manifest["sources"]["collective_gpu_duration"] = (
        incident_mod.source("observed", None) if with_duration else
        incident_mod.source("not_observed", "no duration_ms in the flight-recorder dumps (run with TORCH_NCCL_ENABLE_TIMING=1)"))
    manifest["ranks"] = sorted(set(manifest.get("ranks", [])) | set(per_rank))
    manifest.setdefault("created_unix_ns", time.time_ns())
    incident_mod.write_incident(out, manifest, tables)
    return out
