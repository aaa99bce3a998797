"""Scoring a diagnosis against the truth of examples/gpu/capture_transformer_incidents.py.

Used by the fixture test (the CPU twin of the H200 run) and to print the numbers that
docs/diagnosis.md reports. Definitions:

* injected step scored when it got >= 1.5x slower than typical (slow); its right-cause share
  = sum of by_cause over the accepted causes of its injection / excess_ns;
* normal step: not injected, not a warm-up step; explained share = explained_ns / wall_ns;
* false attribution: a normal step whose excess credits one of the injected causes' specific
  names (cpu_contention, gpu_work_growth, input_starvation, sync_stall, allocator_churn) with at
  least 10% of the typical step: a cause said to have slowed a step it was not injected in;
* host slowdowns not injected: normal steps whose host work (host_submission) grew by at least
  10% of typical. Host time in the step's own spans or launches is measured, not inferred, so
  this is reported (count, ms) rather than scored false; no truth exists for it.
"""

from __future__ import annotations

import numpy as np

INJECTED_CAUSE_NAMES = ("cpu_contention", "gpu_work_growth", "input_starvation", "sync_stall", "allocator_churn")


def score(rec: dict, truth: dict, form: str) -> dict:
    warm = rec["options"]["warmup_steps"]
    steps = {s["step_id"]: s for s in rec["steps"]}
    cause_of = {i: c for c, ids in truth["injected"].items() for i in ids}
    injected = {}
    for i, c in sorted(cause_of.items()):
        s = steps.get(i)
        if s is None or s["excess"] is None:
            continue
        x = s["excess"]
        slow = s["wall_ns"] >= 1.5 * x["typical_ns"]
        ok = truth["accepted_causes"][c][form]
        right = sum(x["by_cause"].get(k, 0) for k in ok)
        injected[i] = {"cause": c, "slow": slow, "wall_ms": s["wall_ns"] / 1e6, "typical_ms": x["typical_ns"] / 1e6,
                       "right_share": right / x["excess_ns"] if x["excess_ns"] > 0 else None, "by_cause": x["by_cause"]}
    normal = [s for sid, s in steps.items() if sid not in cause_of and sid >= warm]
    explained = [s["explained_ns"] / s["wall_ns"] for s in normal if s["wall_ns"] > 0]
    false, host = [], []
    for s in normal:
        x = s["excess"]
        if x is None:
            continue
        bad = {k: v for k, v in x["by_cause"].items() if k in INJECTED_CAUSE_NAMES and v >= 0.1 * x["typical_ns"]}
        if bad:
            false.append({"step_id": s["step_id"], "by_cause": bad})
        if x["by_cause"].get("host_submission", 0) >= 0.1 * x["typical_ns"]:
            host.append({"step_id": s["step_id"], "host_submission_ns": x["by_cause"]["host_submission"]})
    return {"injected": injected, "normal_explained_median": float(np.median(explained)) if explained else None,
            "normal_steps": len(normal), "false_attributions": false, "host_slowdowns_not_injected": host}


def failures(sc: dict) -> list[str]:
    out = []
    for i, r in sc["injected"].items():
        need = 0.1 if r["cause"] == "blocking_sync" else 0.8
        if r["slow"] and (r["right_share"] or 0) < need:
            out.append(f"step {i} ({r['cause']}): {r['wall_ms']:.1f} ms vs typical {r['typical_ms']:.1f} ms, right cause "
                       f"{100 * (r['right_share'] or 0):.0f}% of the excess < {100 * need:.0f}%: {r['by_cause']}")
    if sc["normal_explained_median"] is None or sc["normal_explained_median"] < 0.8:
        out.append(f"normal steps explained median {sc['normal_explained_median']} < 0.8")
    out += [f"false attribution on normal step {f['step_id']}: {f['by_cause']}" for f in sc["false_attributions"]]
    return out
