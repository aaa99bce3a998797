"""Scoring a diagnosis against the truth of examples/gpu/h200_data_movement.py (and of the CPU
twin's synthetic incidents of the same shape, tests/data_movement_synthetic.py).

* injected step: scored when it got at least SLOW x its typical step (an injection that did not
  slow its step says nothing); its right-cause share = sum of by_cause over the accepted causes
  / excess_ns, which must reach truth.min_right_share. A case whose injected steps none got
  slower fails: the capture did not show its cause.
* warm-up: every truth.warm_up_steps step has an attributed warm_up finding explaining its
  whole wall (no per-step cause credited there), summary.warm_up says it once, and warm_up is
  never a ranked next experiment.
* false attribution: a normal step (not injected, not warm-up, past the warm-up positions)
  whose excess credits one of FALSE_NAMES with at least 10% of the typical step.
"""

from __future__ import annotations

SLOW = 1.2
FALSE_NAMES = ("transfer_stall", "compilation", "sync_stall", "allocator_churn", "warm_up")


def score(rec: dict, truth: dict) -> dict:
    steps = {s["step_id"]: s for s in rec["steps"]}
    warm_pos = rec["options"]["warmup_steps"]
    order = [s["step_id"] for s in sorted(rec["steps"], key=lambda s: s["start_ns"])]
    cause_of = {i: c for c, ids in truth["injected"].items() for i in ids}
    injected = {}
    for i, c in sorted(cause_of.items()):
        s = steps.get(i)
        x = s.get("excess") if s else None
        if x is None or x["typical_ns"] <= 0:
            injected[i] = {"cause": c, "scored": False, "why": "no step or no typical reference"}
            continue
        slow = s["wall_ns"] >= SLOW * x["typical_ns"]
        right = sum(x["by_cause"].get(k, 0) for k in truth["accepted_causes"][c])
        injected[i] = {"cause": c, "scored": slow, "wall_ms": s["wall_ns"] / 1e6, "typical_ms": x["typical_ns"] / 1e6,
                       "right_share": right / x["excess_ns"] if x["excess_ns"] > 0 else None, "by_cause": x["by_cause"],
                       "need": truth["min_right_share"][c]}
    warm = {}
    for i in truth.get("warm_up_steps", []):
        s = steps.get(i)
        f = next((f for f in s["findings"] if f["check"] == "warm_up"), None) if s else None
        warm[i] = {"attributed": bool(f and f["verdict"] == "attributed"), "explains_ns": f["explains_ns"] if f else 0,
                   "wall_ns": s["wall_ns"] if s else None}
    ranked = [e["check"] for e in rec["next_experiments"]]
    false = []
    for pos, sid in enumerate(order):
        if sid in cause_of or sid in warm or pos < warm_pos:
            continue
        x = steps[sid].get("excess")
        if x is None:
            continue
        bad = {k: v for k, v in x["by_cause"].items() if k in FALSE_NAMES and v >= 0.1 * x["typical_ns"]}
        if bad:
            false.append({"step_id": sid, "by_cause": bad})
    return {"injected": injected, "warm_up": warm, "summary_warm_up": rec["summary"].get("warm_up"),
            "ranked": ranked, "false_attributions": false, "top_next_experiment": ranked[0] if ranked else None}


def failures(sc: dict) -> list[str]:
    out = []
    scored = [r for r in sc["injected"].values() if r["scored"]]
    if sc["injected"] and not scored:
        out.append("no injected step got slower: the capture does not show its cause")
    for i, r in sc["injected"].items():
        if r["scored"] and (r["right_share"] or 0) < r["need"]:
            out.append(f"step {i} ({r['cause']}): {r['wall_ms']:.1f} ms vs typical {r['typical_ms']:.1f} ms, right cause "
                       f"{100 * (r['right_share'] or 0):.0f}% of the excess < {100 * r['need']:.0f}%: {r['by_cause']}")
    for i, w in sc["warm_up"].items():
        if not w["attributed"] or w["explains_ns"] != w["wall_ns"]:
            out.append(f"step {i}: not wholly warm-up ({w})")
    if sc["warm_up"] and not sc["summary_warm_up"]:
        out.append("summary.warm_up absent")
    if "warm_up" in sc["ranked"]:
        out.append("warm_up ranked as a next experiment")
    out += [f"false attribution on normal step {f['step_id']}: {f['by_cause']}" for f in sc["false_attributions"]]
    return out
