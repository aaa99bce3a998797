"""Collectives of torch.distributed, from PyTorch's own NCCL flight recorder, at snapshot time.

PyTorch already keeps, per process, a ring of its recent collectives with the identities
the multi-rank analysis needs (process group, sequence number, op, sizes, dtypes, enqueue
time, GPU duration with TORCH_NCCL_ENABLE_TIMING=1). Reading that ring at snapshot time
costs the workload nothing per collective, so the recorder does not wrap
torch.distributed calls. The dump is a pickle made by torch in this process; it is still
read through the restricted unpickler, like any dump. Enqueue times are CLOCK_REALTIME
and are moved onto the recorder's monotonic timeline with `unix_minus_host_ns`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ...core.formats.fr_dump import dump_detail, dump_table, parse_dump, versions
from ...core.errors import StallcaseError
from ...core.incident import source

FR_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


def _fr_size() -> int:
    for name in FR_ENV:
        v = os.environ.get(name, "")
        if v.isdigit():
            return int(v)
    return 0


def collect(rank: int | None, unix_minus_host_ns: int, *, dist=None, dumper=None, hostname: str | None = None) -> tuple[pa.Table | None, dict]:
    """(collectives table or None, manifest source entry). `dist`/`dumper` substitute torch (tests)."""
    if dist is None:
        if "torch" not in sys.modules:  # never import torch on the workload's behalf
            return None, source("not_observed", "torch is not imported by this process")
        import torch.distributed as dist  # type: ignore
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None, source("not_observed", "torch.distributed is not initialized in this process")
    except (AttributeError, RuntimeError) as exc:
        return None, source("not_observed", f"torch.distributed unusable: {exc}")
    if _fr_size() <= 0:
        return None, source("not_observed", "PyTorch's NCCL flight recorder is off: set TORCH_FR_BUFFER_SIZE "
                                             "(or TORCH_NCCL_TRACE_BUFFER_SIZE) and TORCH_NCCL_ENABLE_TIMING=1")
    if dumper is None:
        try:
            import torch  # type: ignore

            dumper = torch._C._distributed_c10d._dump_nccl_trace
        except (ImportError, AttributeError) as exc:
            return None, source("not_observed", f"this torch build has no NCCL trace dump: {exc}")
    try:
        data = dumper()
        where = Path("<in-process NCCL flight recorder>")
        dump = parse_dump(bytes(data), where)
        r = rank if rank is not None else int(dist.get_rank())
        table = dump_table(dump, r, where)
        detail = dump_detail(dump, table, where, hostname=hostname)
    except (StallcaseError, RuntimeError, ValueError, TypeError, KeyError) as exc:
        return None, source("not_observed", f"NCCL flight recorder dump unreadable: {type(exc).__name__}: {exc}")
    shifted = pc.subtract(table["enqueue_ns"], pa.scalar(int(unix_minus_host_ns), pa.int64()))
    table = table.set_column(table.column_names.index("enqueue_ns"), "enqueue_ns", shifted)
    return table, source("observed", None, entries=table.num_rows, buffer_size=_fr_size(),
                         clock="enqueue_ns moved from CLOCK_REALTIME with unix_minus_host_ns",
                         dumps={str(r): detail}, **versions({str(r): detail}))
