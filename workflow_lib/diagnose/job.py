"""The diagnosis of a job: what one rank's time is, read against the other ranks.

Two readings, both from the incident's own host timeline (ranks of one incident share one
host clock: capture/ranks.py never merges ranks of two hosts):

* **Collective wait from host spans.** Where no collective was recorded by a flight recorder
  (the `collectives` table: then the cross-rank analysis decides), a rank's host span named
  like a collective (`all_reduce`, `allreduce`, `barrier`, a gloo/nccl op: COLLECTIVE_SPAN) is
  matched across ranks: the k-th such span of step s on each rank is one collective. It
  cannot finish on any rank before the last rank arrives, so the time from a rank's arrival
  to the last arrival (clipped to its span) is that rank's collective wait, credited to the
  late rank; the late rank's own time stays what its own checks say (its host work, its
  wait). `collective_span_findings` returns these as findings the step records place first.
* **The job summary.** Per step index reached by every rank, the slowest rank; the slowest
  rank overall with its own top cause; the ranks that waited for it; and for ranks with roles,
  each consumer's input wait linked to what the producers were doing during it (overlap with
  their spans by name). The next experiments then name the lever on the other side.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow.compute as pc

from ..core.arrow import values
from ..core.incident import Incident
from .fast import searchsorted

# Host span names of a collective (segments, case-insensitive): torch.distributed op names,
# the spellings people give their own spans, and gloo/NCCL prefixes.
COLLECTIVE_SPAN = re.compile(
    r"(^|[^a-z0-9])(all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|all_?to_?all|gloo|nccl)([^a-z0-9]|$)",
    re.IGNORECASE)
MIN_WAIT_NS = 100_000  # a wait under 0.1 ms is arrival jitter, not a peer to wait for
MAX_LINKED_SPANS = 5
MIN_OVER_PEERS_NS = 100_000  # a span under 0.1 ms a step longer than on the peers is jitter, not a cause


def _spans(incident: Incident):
    t = incident.table("spans")
    if t.num_rows == 0 or "rank" not in t.column_names:
        return None
    rank = values(t["rank"], null=-1)
    # Names as references to their distinct values (a million spans hold a few dozen names).
    enc = pc.dictionary_encode(t["name"]).combine_chunks()
    names = np.asarray(enc.dictionary.to_pylist(), dtype=object)[enc.indices.to_numpy(zero_copy_only=False)]
    return {"name": names, "rank": rank,
            "thread": values(t["thread_id"]), "start": values(t["start_ns"]), "end": values(t["end_ns"])}


def _steps(incident: Incident):
    t = incident.table("steps")
    return {"rank": values(t["rank"], null=-1), "step": values(t["step_id"]), "thread": values(t["thread_id"]),
            "start": values(t["start_ns"]), "end": values(t["end_ns"])}


def roles(incident: Incident) -> dict[int, str]:
    job = incident.typed_manifest.job  # ABSENT or None: one process, or not recorded
    return {int(r): str(v) for r, v in (job["roles"] if job and "roles" in job else {}).items()}


def collective_span_findings(incident: Incident, origin_ns: int) -> dict:
    """(rank, step_id) -> a collective_wait finding placed on the rank's collective spans."""
    st = _steps(incident)
    ranks = sorted(set(st["rank"].tolist()) - {-1})
    if len(ranks) < 2:  # one rank: no span of it is read
        return {}
    sp = _spans(incident)
    if sp is None:
        return {}
    is_coll = np.array([bool(COLLECTIVE_SPAN.search(str(n))) for n in sp["name"]], bool)
    if not is_coll.any():
        return {}
    # Each rank's collective spans per step, in start order.
    per: dict[tuple[int, int], list[int]] = {}
    for i in range(len(st["step"])):
        r, s = int(st["rank"][i]), int(st["step"][i])
        if r < 0:
            continue
        rows = np.flatnonzero(is_coll & (sp["rank"] == r) & (sp["thread"] == st["thread"][i])
                              & (sp["start"] >= st["start"][i]) & (sp["end"] <= st["end"][i]))
        per[(r, s)] = sorted(rows.tolist(), key=lambda k: sp["start"][k])
    out = {}
    common = set.intersection(*[{s for (r, s) in per if r == rk} for rk in ranks])
    for s in sorted(common):
        lists = {r: per[(r, s)] for r in ranks}
        n = min(len(v) for v in lists.values())
        for k in range(n):
            rows = {r: lists[r][k] for r in ranks}
            arrival = {r: int(sp["start"][i]) for r, i in rows.items()}
            late = max(arrival, key=lambda r: (arrival[r], r))
            for r, i in rows.items():
                wait = min(arrival[late] - arrival[r], int(sp["end"][i] - sp["start"][i]))
                if r == late or wait < MIN_WAIT_NS:
                    continue
                f = out.setdefault((r, s), {"verdict": "attributed", "explains_ns": 0, "missing": [],
                                            "evidence": [], "placed": []})
                f["explains_ns"] += wait
                f["placed"].append((arrival[r] - origin_ns, arrival[r] - origin_ns + wait))
                f["evidence"].append({"span": str(sp["name"][i]), "collective": k, "waited_for_rank": late,
                                      "wait_ns": wait, "basis": "host spans matched across ranks by step and order"})
    return out


def span_profile(ev, tids: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict:
    """What one rank's steps spend in each span name, for reading the rank against its peers.

    A rank that is slow on every step (more host work than its peers, each step) is no slower
    than its own typical step, so its own excess says nothing about what it does that the
    others do not: summary_of compares these medians across ranks instead. Returns
    {"median_ns": name -> median over the rank's steps of the time its step thread spent in
    spans of that name (0 in a step without one), "collective": names that are collectives or
    hold one (their time is waiting for peers, not own work)}. Names in fewer than half the
    steps have a median of 0 and are left out."""
    n = starts.size
    if n == 0 or ev.span_start.size == 0:
        return {"median_ns": {}, "collective": []}
    order = np.argsort(starts, kind="stable")
    s_st, s_en, s_tid = starts[order], ends[order], tids[order]
    k = searchsorted(s_st, ev.span_start, "right") - 1
    kk = np.clip(k, 0, None)
    inside = (k >= 0) & (ev.span_end <= s_en[kk]) & (ev.span_thread == s_tid[kk])
    codes, step = ev.span_name.codes[inside], kk[inside]
    length = (ev.span_end - ev.span_start)[inside]
    names = ev.span_name.dictionary
    is_coll = ev.span_name.matches(COLLECTIVE_SPAN)  # per span row
    waiting = np.zeros(names.size, bool)  # per name: a collective, or a span holding one of its thread's
    waiting[np.unique(ev.span_name.codes[is_coll])] = True
    for t in np.unique(ev.span_thread[is_coll]).tolist():
        cs = np.sort(ev.span_start[is_coll & (ev.span_thread == t)])
        mine = np.flatnonzero((ev.span_thread == t) & ~is_coll)
        hit = searchsorted(cs, ev.span_end[mine], "left") > searchsorted(cs, ev.span_start[mine], "left")
        waiting[np.unique(ev.span_name.codes[mine[hit]])] = True
    out = {}
    pairs = np.unique(codes.astype(np.int64) * n + step)
    steps_with = np.bincount((pairs // n).astype(np.int64), minlength=names.size)
    for c in np.flatnonzero(steps_with * 2 >= n).tolist():  # a median above 0 needs half the steps
        sel = codes == c
        per_step = np.bincount(step[sel], weights=length[sel], minlength=n)
        out[str(names[c])] = int(np.median(per_step))
    return {"median_ns": out, "collective": sorted(str(x) for x in names[waiting])}


def _peer_spans(slowest: int, ranks: list[int], dig: dict, role: dict[int, str]) -> dict | None:
    """The spans in which the slowest rank spends more per step than its peers (the other ranks
    of its role): name -> its median minus the peers' median of theirs, largest first; None
    without a profile for every rank or with no such span."""
    peers = [r for r in ranks if r != slowest and role.get(r) == role.get(slowest)]
    if not peers or any(dig[r].get("span_profile") is None for r in [slowest, *peers]):
        return None
    waiting = {n for r in [slowest, *peers] for n in dig[r]["span_profile"]["collective"]}
    mine = dig[slowest]["span_profile"]["median_ns"]
    diff = {name: ns - int(np.median([dig[p]["span_profile"]["median_ns"].get(name, 0) for p in peers]))
            for name, ns in mine.items() if name not in waiting}
    more = sorted(((n, d) for n, d in diff.items() if d >= MIN_OVER_PEERS_NS), key=lambda kv: (-kv[1], kv[0]))
    return dict(more[:MAX_LINKED_SPANS]) or None


def _overlap_by_name(lo: np.ndarray, hi: np.ndarray, sp, mask) -> dict[str, int]:
    """Total overlap of the intervals [lo, hi) with the spans selected by `mask`, per span name."""
    out: dict[str, int] = {}
    rows = np.flatnonzero(mask)
    if not len(rows) or not len(lo):
        return out
    for i in rows:
        ov = np.clip(np.minimum(hi, sp["end"][i]) - np.maximum(lo, sp["start"][i]), 0, None).sum()
        if ov:
            out[str(sp["name"][i])] = out.get(str(sp["name"][i]), 0) + int(ov)
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:MAX_LINKED_SPANS])


def _late_rank(step_id: int, ranks: list[int], coll: dict) -> int | None:
    """The rank the others waited for in this step's collectives (weighted by their wait)."""
    weight: dict[int, int] = {}
    for r in ranks:
        for e in (coll.get((r, step_id)) or {}).get("evidence") or []:
            if isinstance(e, dict) and "waited_for_rank" in e:
                weight[int(e["waited_for_rank"])] = weight.get(int(e["waited_for_rank"]), 0) + int(e["wait_ns"])
    return max(sorted(weight), key=weight.get) if weight else None


def summary_of(incident: Incident, digests: list[dict | None], wait_regex, coll: dict | None = None) -> dict | None:
    """`summary.job` from each rank's rank_digest. In a synchronous job every rank's step lasts
    as long as the slowest's, so a step's slowest rank is the one the others waited for inside
    its collectives (`coll`); without collectives, the longest step."""
    # One digest per rank: diagnose's rank keys are the ranks (vocabulary.rank_key).
    dig = {d["rank"]: d for d in digests if d is not None}
    ranks = sorted(dig)
    if len(ranks) < 2:
        return None
    role = roles(incident)
    common = set.intersection(*[set(dig[r]["walls"]) for r in ranks])
    slowest_count = {r: 0 for r in ranks}
    for s in common:
        late = _late_rank(s, ranks, coll or {})
        slowest_count[late if late is not None else max(ranks, key=lambda r: (dig[r]["walls"][s], -r))] += 1
    cause = {r: dict(dig[r]["cause"]) for r in ranks}
    waits = {r: dig[r]["wait_ns"] for r in ranks}
    slowest = max(ranks, key=lambda r: (slowest_count[r], -r)) if common else None
    if slowest is not None:
        # What the slowest rank does more of than its peers, each step; without profiles (or
        # with no such span), the spans behind its own top cause.
        more = _peer_spans(slowest, ranks, dig, role)
        cause[slowest]["spans"] = list(more) if more else list(dig[slowest]["spans"])
        if more:
            cause[slowest]["span_ns_per_step_over_peers"] = more
    waited = sorted(r for r in ranks if r != slowest and waits[r] > 0)
    return {"ranks": ranks, "roles": {str(r): v for r, v in sorted(role.items())},
            "common_steps": len(common), "slowest_rank_steps": {str(r): n for r, n in slowest_count.items()},
            "slowest_rank": slowest, "slowest_rank_role": role.get(slowest) if slowest is not None else None,
            "slowest_rank_cause": cause.get(slowest) if slowest is not None else None,
            "collective_wait_ns_by_rank": {str(r): int(waits[r]) for r in ranks},
            "waited_for_slowest": waited,
            "queue_waits": _queue_waits(incident, role, wait_regex)}


def _queue_waits(incident: Incident, role: dict[int, str], wait_regex) -> list[dict]:
    """Each consumer's wait spans, linked to the producers' spans during them."""
    sp = _spans(incident)
    if sp is None or "producer" not in role.values():
        return []
    producers = sorted(r for r, v in role.items() if v == "producer")
    is_wait = np.array([bool(wait_regex.search(str(n))) for n in sp["name"]], bool)
    out = []
    for r, v in sorted(role.items()):
        if v == "producer":
            continue
        mine = is_wait & (sp["rank"] == r)
        if not mine.any():
            continue
        lo, hi = sp["start"][mine], sp["end"][mine]
        linked = {str(p): _overlap_by_name(lo, hi, sp, (sp["rank"] == p) & ~is_wait) for p in producers}
        out.append({"rank": r, "role": v, "wait_ns": int((hi - lo).sum()), "waits": int(mine.sum()),
                    "overlapped_producer_spans": {p: d for p, d in linked.items() if d}})
    return out


def experiments(job: dict | None, experiments: list[dict]) -> list[dict]:
    """The next experiments with the job's levers: the slowest rank's own cause named on that
    rank, and the consumers' queue wait as "more producers / lower min-ready" bounded by the wait."""
    if not job:
        return experiments
    out = [dict(e) for e in experiments]
    # `job` is summary_of's, every key set (the slowest rank's cause and spans with it).
    slow, cause = job["slowest_rank"], job["slowest_rank_cause"]
    for e in out:
        if slow is not None and e["check"] == cause["check"] and job["waited_for_slowest"]:
            where = f" on rank {slow}" + (f" ({job['slowest_rank_role']})" if job["slowest_rank_role"] else "")
            spans = f" (spans {', '.join(cause['spans'])})" if cause["spans"] else ""
            e["candidate_change"] = (f"{e['candidate_change']}{where}{spans}: ranks "
                                     f"{', '.join(map(str, job['waited_for_slowest']))} wait for it inside the collective")
    waits = [w for w in job["queue_waits"] if w["overlapped_producer_spans"]]
    if waits:
        spans = sorted({n for w in waits for d in w["overlapped_producer_spans"].values() for n in d})
        prods = sorted({p for w in waits for p in w["overlapped_producer_spans"]}, key=int)
        change = (f"more producers, or a lower min-ready: the consumers' (ranks {', '.join(str(w['rank']) for w in waits)}) "
                  f"queue wait overlapped producer rank(s) {', '.join(prods)} in {', '.join(spans)}")
        lever = next((e for e in out if e["check"] == "input_starvation"), None)
        if lever is None:  # bounded by the consumers' wait: more producers cannot give back more
            lever = {"rank": 0, "check": "input_starvation", "recoverable_upper_bound_ns": sum(w["wait_ns"] for w in waits),
                     "steps": sum(w["waits"] for w in waits)}
            out.append(lever)
        lever.update(candidate_change=change, risk="low",
                     risk_note="changes how many producers feed the queue (or how many items a consumer waits for), not what they compute")
        out.sort(key=lambda e: -e["recoverable_upper_bound_ns"])
    for i, e in enumerate(out, 1):
        e["rank"] = i
    return out
