"""What the links between GPUs did, only as far as NVML observed it.

The recorder samples NVLink and PCIe throughput into the `nvml` table under metric names
starting `nvlink_` (e.g. nvlink_tx_bytes, nvlink_rx_bytes: NVML field-value counters) or
`pcie_` (pcie_tx_kbps, pcie_rx_kbps: nvmlDeviceGetPcieThroughput). Without such samples
the record says `not_observed` and makes no claim about link speed or topology.
"""

from __future__ import annotations

import pandas as pd

from ..core.incident import Incident

PREFIXES = ("nvlink_", "pcie_")


def transport(incidents: list[Incident], window_ns: dict[str, tuple[int, int]] | None = None) -> dict:
    """Per incident/rank/device/metric: sample count, min, max, mean and span (ns) of link samples.

    `window_ns` (incident -> (start, end) on its timeline) limits samples to the analysed ops.
    """
    rows = []
    for inc in incidents:
        t = inc.table("nvml").to_pandas()
        t = t[t["metric"].str.startswith(PREFIXES)]
        if window_ns and str(inc.path) in window_ns:
            lo, hi = window_ns[str(inc.path)]
            t = t[(t["ts_ns"] >= lo) & (t["ts_ns"] <= hi)]
        if t.empty:
            continue
        t = t.assign(rank=t["rank"].fillna(-1).astype(int))
        agg = t.groupby(["rank", "device", "metric"]).agg(
            samples=("value", "size"), min=("value", "min"), max=("value", "max"), mean=("value", "mean"),
            first_ns=("ts_ns", "min"), last_ns=("ts_ns", "max")).reset_index()
        agg["incident"] = str(inc.path)
        rows.append(agg)
    if not rows:
        return {"transport": "not_observed",
                "reason": "no nvlink_* or pcie_* samples in any nvml table; nothing is claimed about link speed"}
    df = pd.concat(rows, ignore_index=True)
    df["span_ns"] = df["last_ns"] - df["first_ns"]
    series = [{"incident": r.incident, "rank": None if r.rank < 0 else int(r.rank), "device": int(r.device),
               "metric": r.metric, "samples": int(r.samples), "min": float(r.min), "max": float(r.max),
               "mean": float(r.mean), "span_ns": int(r.span_ns)} for r in df.itertuples()]
    return {"transport": "observed", "reason": None, "series": series}
