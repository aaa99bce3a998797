"""Temporal breakdown (idle / compute / non-compute) computed the way Holistic Trace Analysis
defines it, so the two can be compared on the same trace (docs/diagnosis.md).

HTA 0.5.0 `get_temporal_breakdown`, per rank:
  population  GPU kernels/memcpy/memset whose launching runtime call starts before the last
              ProfilerStep starts (the last step and GPU work launched outside the trace's
              host events are dropped);
  window      first such GPU start to last such GPU end ("kernel_time");
  idle        window minus the union of all of them;
  compute     union of computation kernels (not communication, not Memcpy/Memset);
  non-compute union of all minus compute.
Our diagnosis measures use step windows instead, and keep every GPU activity; `hta_like=False`
gives the breakdown over the whole recorded window with every GPU activity.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.incident import Incident
from . import measures
from .evidence import rank_key

_COMM = re.compile(r"nccl|ncclKernel|ncclDevKernel|cross_device_reduce|all_reduce|allgather|reduce_scatter", re.IGNORECASE)


def _for_rank(t: pa.Table, rk: int) -> pa.Table:
    return t.filter(pa.array(rank_key(t["rank"]) == rk)) if t.num_rows else t


def temporal_breakdown(inc: Incident, *, hta_like: bool = True) -> list[dict]:
    """Per rank: {rank, idle_ns, compute_ns, non_compute_ns, kernel_time_ns}."""
    k_all, m_all, rt_all, steps_all = inc.table("kernels"), inc.table("memcpy"), inc.table("runtime_api"), inc.table("steps")
    out = []
    ranks = sorted(set(rank_key(k_all["rank"]).tolist()) | set(rank_key(m_all["rank"]).tolist()))
    for rk in ranks:
        k, m = _for_rank(k_all, rk), _for_rank(m_all, rk)
        ks, ke, kc = k["start_ns"].to_numpy(), k["end_ns"].to_numpy(), pc.fill_null(k["correlation_id"], -1).to_numpy()
        ms, me, mc = m["start_ns"].to_numpy(), m["end_ns"].to_numpy(), pc.fill_null(m["correlation_id"], -1).to_numpy()
        names = k["name"].to_numpy(zero_copy_only=False)
        uniq, inv = np.unique(names, return_inverse=True) if names.size else (names, np.zeros(0, np.int64))
        comm = np.array([bool(_COMM.search(str(n))) for n in uniq], bool)[inv] if uniq.size else np.zeros(0, bool)
        keep_k, keep_m = np.ones(ks.size, bool), np.ones(ms.size, bool)
        if hta_like:
            rt, st = _for_rank(rt_all, rk), _for_rank(steps_all, rk)
            last_step = int(pc.max(st["start_ns"]).as_py()) if st.num_rows > 1 else None
            rts, rtc = rt["start_ns"].to_numpy(), pc.fill_null(rt["correlation_id"], -1).to_numpy()
            launched = rtc[rts < last_step] if last_step is not None else rtc
            launched = launched[launched >= 0]
            keep_k, keep_m = np.isin(kc, launched), np.isin(mc, launched)
        gs = np.concatenate([ks[keep_k], ms[keep_m]])
        ge = np.concatenate([ke[keep_k], me[keep_m]])
        if gs.size == 0:
            continue
        busy = measures.union(gs, ge)
        compute = measures.union(ks[keep_k & ~comm], ke[keep_k & ~comm])
        window = int(ge.max() - gs.min())
        out.append({"rank": None if rk < 0 else int(rk), "idle_ns": window - busy.total_ns, "compute_ns": compute.total_ns,
                    "non_compute_ns": busy.total_ns - compute.total_ns, "kernel_time_ns": window})
    return out
