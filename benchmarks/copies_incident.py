"""big_incident with copies and memsets of every kind transfer_stall tells apart, column-wise.

    copies_incident(steps=1_000_000) -> Incident

On top of big_incident's 1-ms steps (kernels at +600 and +750 us on stream 7, launched at +100
and +250 us; a declared wait in every 10th step, a device sync in every 50th), step s gets, by
s % 8 (times from the step start):
  0  pageable HtoD: cudaMemcpyAsync 160-400 us holding the host, the copy 170-400 us
  1  DtoH pack into pinned memory on the training stream, 560-700 us (the kernel at 750 us waits)
  2  loss.item(): `aten::item` 800-900 us around cudaMemcpyAsync 810-815 us (4 B DtoH, 872-876 us)
     and cudaStreamSynchronize 815-880 us; every 16th step a `metrics.log` span 790-910 us
     around it that also launches (cudaLaunchKernel 905-906 us): not the read's op
  3  cudaMemset 160-300 us (synchronous), the memset 170-290 us
  4  a prefetch on side stream 9 (pinned HtoD 600-700 us) nothing waits for
  5  two copies without a runtime call: 560-595 us on stream 7 (the kernel at 600 us is
     within min_gap of its end) and 990-1020 us, across the boundary into the next step
  6  synchronous cudaMemcpy DtoH 160-400 us on thread 1 while thread 2 waits in
     `data.load_batch` 150-500 us (another thread's wait is never the call's)
  7  a DtoD copy 560-580 us with no memory kinds or async flag, and a DtoH 950-996 us on stream 7
     whose next kernel there (launched at 940 us) starts in the next step, at 1005 us
Also: on thread 3 in step 5 a read (cudaMemcpyAsync 310-312 us, its sync 312-340 us) in a span
`tolist` 300-360 us holding nothing else (every 16th step from 13 the sync has no length: then
it is not after the return, and nothing waited); calls of no length every 16th step from 10 at
the read's return (a launch: not after it, though inside `aten::item`, so no op span there) and
every 16th step from 2 at the op span's start (a copy call: not inside it). Every 24th step from
18, calls on thread 1 that nest: cudaGraphLaunch 805-950 us, cudaMemsetAsync 806-808 us inside
`aten::item` (other work there: no op span).
Deterministic, so the same call gives the same incident.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from benchmarks.big_incident import STEP_NS, _table, big_incident
from workflow_lib.core.incident import Incident, source

US = 1_000
_CORR0 = 1 << 40  # copies' correlation ids, apart from the kernels'


def copies_incident(steps: int = 1_000_000) -> Incident:
    inc = big_incident(steps)
    s = np.arange(steps, dtype=np.int64)
    start = 10_000_000 + s * STEP_NS
    m, rt, sp, k = [], [], [], []
    used = [_CORR0]

    def copy(sel, a, b, kind, stream, nbytes, src, dst, is_async, call=None, thread=1):
        n = int(sel.sum())
        ids = np.arange(used[0], used[0] + n, dtype=np.int64)
        used[0] += n
        m.append(dict(kind=[kind] * n, device=np.zeros(n, np.int32), stream=np.full(n, stream, np.int64),
                      bytes=np.full(n, nbytes, np.int64), correlation_id=ids if call else [None] * n,
                      start_ns=start[sel] + a * US, end_ns=start[sel] + b * US, src_kind=[src] * n, dst_kind=[dst] * n,
                      is_async=[is_async] * n))
        if call:
            name, ca, cb = call
            api(sel, ca, cb, name, ids, thread)

    def api(sel, a, b, name, ids=None, thread=1, is_sync=False):
        n = int(sel.sum())
        rt.append(dict(name=[name] * n, thread_id=np.full(n, thread, np.int64),
                       correlation_id=[None] * n if ids is None else ids,
                       start_ns=start[sel] + a * US, end_ns=start[sel] + b * US, is_sync=np.full(n, is_sync)))

    def span(sel, a, b, name, depth, thread=1):
        n = int(sel.sum())
        sp.append(dict(name=[name] * n, thread_id=np.full(n, thread, np.int64), depth=np.full(n, depth, np.int32),
                       start_ns=start[sel] + a * US, end_ns=start[sel] + b * US))

    r = s % 8
    copy(r == 0, 170, 400, "HtoD", 7, 64 << 20, "pageable", "device", True, ("cudaMemcpyAsync", 160, 400))
    copy(r == 1, 560, 700, "DtoH", 7, 128 << 20, "device", "pinned", True, ("cudaMemcpyAsync", 300, 305))
    copy(r == 2, 872, 876, "DtoH", 7, 4, "device", "pageable", True, ("cudaMemcpyAsync", 810, 815))
    api(r == 2, 815, 880, "cudaStreamSynchronize", is_sync=True)
    span(r == 2, 800, 900, "aten::item", 2)
    logged = (s % 16) == 2
    span(logged, 790, 910, "metrics.log", 1)
    api(logged, 905, 906, "cudaLaunchKernel")
    copy(r == 3, 170, 290, "memset", 7, 1 << 30, None, "device", False, ("cudaMemset", 160, 300))
    copy(r == 4, 600, 700, "HtoD", 9, 1 << 20, "pinned", "device", True, ("cudaMemcpyAsync", 160, 165))
    copy(r == 5, 560, 595, "HtoD", 7, 1 << 20, "pinned", "device", True)
    copy(r == 5, 990, 1_020, "HtoD", 7, 1 << 20, "pinned", "device", True)
    copy(r == 6, 170, 390, "DtoH", 7, 8 << 20, "device", "pinned", False, ("cudaMemcpy", 160, 400))
    span(r == 6, 150, 500, "data.load_batch", 0, thread=2)
    copy(r == 7, 560, 580, "DtoD", 7, 1 << 20, None, None, None, ("cudaMemcpyAsync", 550, 552))
    copy(r == 7, 950, 996, "DtoH", 7, 1 << 20, "device", "pinned", True, ("cudaMemcpyAsync", 930, 932))
    launch = np.arange(used[0], used[0] + int((r == 7).sum()), dtype=np.int64)
    used[0] += launch.size
    api(r == 7, 940, 945, "cudaLaunchKernel", launch)
    k.append(dict(name=["late"] * launch.size, device=np.zeros(launch.size, np.int32), stream=np.full(launch.size, 7, np.int64),
                  correlation_id=launch, start_ns=start[r == 7] + 1_005 * US, end_ns=start[r == 7] + 1_010 * US))
    # Calls of no length at the read's return and at its op's start: neither is after nor inside.
    api((s % 16) == 10, 815, 815, "cudaLaunchKernel")
    api(logged, 800, 800, "cudaMemcpyAsync")
    # Every 24th step from 18, calls that nest: a graph launch 805-950 us running past the op
    # span's end, and inside the span before the read a cudaMemsetAsync 806-808 us (other work).
    nest = (s % 24) == 18
    api(nest, 805, 950, "cudaGraphLaunch")
    api(nest, 806, 808, "cudaMemsetAsync")
    # A read on a thread of its own, in a span that holds nothing else.
    copy(r == 5, 330, 331, "DtoH", 7, 8, "device", "pinned", True, ("cudaMemcpyAsync", 310, 312), thread=3)
    api((s % 16) == 5, 312, 340, "cudaStreamSynchronize", thread=3, is_sync=True)
    api((s % 16) == 13, 312, 312, "cudaStreamSynchronize", thread=3, is_sync=True)  # not after the return: no read
    span(r == 5, 300, 360, "tolist", 0, thread=3)

    tables = dict(inc.tables)
    tables["memcpy"] = _sorted(_table("memcpy", _cat(m)))
    tables["kernels"] = _sorted(pa.concat_tables([inc.tables["kernels"], _table("kernels", _cat(k))]))
    tables["runtime_api"] = _sorted(pa.concat_tables([inc.tables["runtime_api"], _table("runtime_api", _cat(rt))]))
    tables["spans"] = _sorted(pa.concat_tables([inc.tables["spans"], _table("spans", _cat(sp))]))
    manifest = dict(inc.manifest, sources=dict(inc.manifest["sources"], memcpy=source("observed")))
    return Incident(path=inc.path, manifest=manifest, tables=tables)


def _cat(parts: list[dict]) -> dict:
    """The parts' columns end to end (a column with nulls in some part as a list)."""
    out = {}
    for k in parts[0]:
        vals = [p[k] for p in parts]
        if any(isinstance(v, list) for v in vals):
            out[k] = [x for v in vals for x in (v if isinstance(v, list) else v.tolist())]
        else:
            out[k] = np.concatenate(vals)
    return out


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("start_ns", "ascending")])
