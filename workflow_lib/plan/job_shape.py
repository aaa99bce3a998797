"""The job's shape, read from its recording before any trial runs: it decides the job metric.

A job's value per run depends on how its ranks relate, and the plan must choose it before
the first trial (choosing after seeing the trials would be choosing the answer):

- `collective`: every rank meets the others in a collective (a host span named like one:
  diagnose/job.COLLECTIVE_SPAN) in at least MIN_COLLECTIVE_FRACTION of its steps. The job
  advances at its slowest rank, so the run's value is, per step index every rank reached,
  the slowest rank's time (`job: slowest_rank`).
- `pipeline`: ranks exchange work through a queue or pipe (roles `producer`/`consumer`
  declared, or a wait span such as `queue_get`/`recv`/`pipe` on a rank) and do not meet in
  collectives. They are not in step: the maximum over ranks at one step index mixes one
  consumer's wait with another's compute and swings from run to run. The run's value is the
  job's throughput of the role that does the work (consumers by default; `job: throughput`):
  the counted ranks' rates added up (job_metric.py reads each over windows of a few steps).
  Unless the recording shows that role fed by another: when the work role waited on the queue
  for at least WAITING_SHARE of its counted step time and another role for at most
  BOUND_WAIT_SHARE of its own, that other role sets the job's rate (in steady state the fed
  role takes what it makes), and the fed role's own rate is what it makes of a backlog: a
  consumer that drains every queued item at once runs at its own speed through whatever
  queued up while it started, then at the feeder's, and which consumer gets how much is a race
  at start (the H200 job, tests/fixtures/h200/round7_20261204_eve: the consumers' throughput
  had an A/A floor of ±568%, the producer's ±4.6%). The job's value is then the feeding
  role's throughput (`bound_role`), and the comparison warns when, in the candidate's runs,
  the fed role's rate fell behind it (compare/job_metrics.bound_warning): its throughput is
  the job's only while the others keep up.
- `independent`: neither collectives nor queues: the ranks do not synchronize, and the job's
  throughput over every rank is its value.

The shape, the reason and each role's wait share are recorded in the plan
(`design.metric.shape`); a metric the user chose (`job`, `role`, `ranks`) is kept and the
shape still says what was seen.
"""

from __future__ import annotations

import re

import numpy as np

# A rank that meets the others in a collective in at least this share of its steps is
# synchronous. Not 1.0: a gradient-accumulation loop syncs every k-th step, and a step that
# only ends the loop may hold none; below a half the ranks run free most of the time.
MIN_COLLECTIVE_FRACTION = 0.5
# Span names of a hand-over between processes (whole name segments, case-insensitive).
QUEUE_SPAN = re.compile(r"(^|[^a-z0-9])(queue|recv|pipe|get|put|dequeue|pop)([^a-z0-9]|$)", re.IGNORECASE)
# The role whose throughput is the job's by default, in order of preference.
WORK_ROLES = ("consumer", "worker", "trainer")
# A role that waited on the queue for at least this share of its counted step time is fed by
# another (the recorded consumers: 87%); one that waited for at most BOUND_WAIT_SHARE of its
# own is not held up by anyone, so it bounds the job's rate (the recorded producer: 0%).
WAITING_SHARE = 0.5
BOUND_WAIT_SHARE = 0.1

SHAPES = ("collective", "pipeline", "independent")


def _per_rank_steps(inc) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    from ..core.arrow import values

    t = inc.table("steps")
    if t.num_rows == 0 or "rank" not in t.column_names:
        return {}
    rank, start, end = values(t["rank"], null=-1), values(t["start_ns"]), values(t["end_ns"])
    out = {}
    for r in np.unique(rank):
        if r < 0:
            continue
        sel = rank == r
        order = np.argsort(start[sel], kind="stable")
        out[int(r)] = (start[sel][order], end[sel][order])
    return out


def _spans(inc):
    from ..core.arrow import values

    t = inc.table("spans")
    if t.num_rows == 0 or "rank" not in t.column_names:
        return None
    return {"rank": values(t["rank"], null=-1), "start": values(t["start_ns"]), "end": values(t["end_ns"]),
            "name": np.asarray(t["name"].to_pylist(), dtype=object)}


def _steps_holding(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> int:
    """How many steps [start, end) hold at least one of the times `at`."""
    if at.size == 0 or starts.size == 0:
        return 0
    k = np.searchsorted(starts, at, side="right") - 1
    ok = (k >= 0) & (at < ends[np.clip(k, 0, None)])
    return int(np.unique(k[ok]).size)


def _waited(starts: np.ndarray, ends: np.ndarray, span_start: np.ndarray, span_end: np.ndarray) -> tuple[float, float]:
    """(time in queue spans, step time) over the given steps: the spans that start inside a step,
    each clipped to that step's end."""
    total = float((ends - starts).sum())
    if span_start.size == 0 or starts.size == 0:
        return 0.0, total
    k = np.searchsorted(starts, span_start, side="right") - 1
    ok = (k >= 0) & (span_start < ends[np.clip(k, 0, None)])
    waited = np.minimum(span_end[ok], ends[k[ok]]) - span_start[ok]
    return float(np.clip(waited, 0, None).sum()), total


def _role_shares(steps, sp, is_queue, roles: dict[int, str], skip: int) -> dict[str, float]:
    """Each declared role's share of its counted step time (after `skip` steps, as the metric
    counts them) spent in queue spans: the time it waited for another role."""
    acc: dict[str, list[float]] = {}
    for r, (s, e) in steps.items():
        if r not in roles or len(s) <= skip:
            continue
        mine = (sp["rank"] == r) & is_queue if sp is not None else None
        order = np.argsort(sp["start"][mine], kind="stable") if mine is not None else None
        w, tot = (_waited(s[skip:], e[skip:], sp["start"][mine][order], sp["end"][mine][order]) if mine is not None
                  else (0.0, float((e[skip:] - s[skip:]).sum())))
        a = acc.setdefault(roles[r], [0.0, 0.0])
        a[0], a[1] = a[0] + w, a[1] + tot
    return {role: round(min(1.0, w / tot), 4) if tot > 0 else 0.0 for role, (w, tot) in sorted(acc.items())}


def _bound_role(shares: dict[str, float], work_role: str | None) -> str | None:
    """The role that feeds the work role, when the recording shows it: the work role waited for
    most of its time, and that role (the one that waited least) hardly at all."""
    if work_role is None or shares.get(work_role, 0.0) < WAITING_SHARE:
        return None
    others = {r: v for r, v in shares.items() if r != work_role}
    if not others:
        return None
    least = min(others, key=lambda r: (others[r], r))
    return least if others[least] <= BOUND_WAIT_SHARE else None


def classify(inc, roles: dict[int, str], skip_steps: int = 0) -> dict:
    """{"kind", "reason", "work_role"} for an incident of several ranks; a pipeline with
    declared roles adds "wait_share" (role -> share of its counted step time in queue spans,
    the steps after `skip_steps`, as the metric counts them) and, when those show the work role
    fed by another, "bound_role" (then also its "work_role": the role whose throughput counts)."""
    from ..diagnose.job import COLLECTIVE_SPAN

    steps = _per_rank_steps(inc)
    sp = _spans(inc)
    if not steps:
        return {"kind": "independent", "work_role": None,
                "reason": "the recording holds no per-rank steps: nothing shows the ranks synchronize"}
    names = sp["name"] if sp is not None else np.array([], dtype=object)
    uniq = {n: (bool(COLLECTIVE_SPAN.search(str(n))), bool(QUEUE_SPAN.search(str(n)))) for n in set(names.tolist())}
    is_coll = np.array([uniq[n][0] for n in names], bool)
    is_queue = np.array([uniq[n][1] for n in names], bool)
    frac, queued = {}, {}
    for r, (s, e) in steps.items():
        mine = sp["rank"] == r if sp is not None else np.zeros(0, bool)
        frac[r] = _steps_holding(s, e, np.sort(sp["start"][mine & is_coll])) / len(s) if sp is not None else 0.0
        queued[r] = _steps_holding(s, e, np.sort(sp["start"][mine & is_queue])) / len(s) if sp is not None else 0.0
    low = min(frac, key=frac.get)
    coll_names = sorted({str(n) for n, (c, _) in uniq.items() if c})[:3]
    if frac[low] >= MIN_COLLECTIVE_FRACTION:
        return {"kind": "collective", "work_role": None,
                "reason": f"every rank meets the others in a collective ({', '.join(coll_names)}) in "
                          f"{frac[low]:.0%} or more of its steps (fewest: rank {low}): the job advances at its "
                          "slowest rank, so a step's time is the slowest rank's"}
    declared = set(roles.values())
    work_role = next((r for r in WORK_ROLES if r in declared), None)
    waiting = sorted(r for r, f in queued.items() if f > 0)
    q_names = sorted({str(n) for n, (_, q) in uniq.items() if q})[:3]
    if waiting or {"producer", "consumer"} <= declared:
        how = (f"wait spans {', '.join(q_names)} on rank(s) {', '.join(map(str, waiting))}" if waiting
               else f"roles {', '.join(sorted(declared))}")
        head = (f"ranks exchange work through a queue or pipe ({how}) and meet in no collective in most "
                f"steps (rank {low}: {frac[low]:.0%}): they are not in step")
        shares = _role_shares(steps, sp, is_queue, roles, skip_steps) if roles else {}
        bound = _bound_role(shares, work_role)
        out = {"kind": "pipeline", "work_role": bound or work_role}
        if shares:
            out["wait_share"] = shares
        if bound:
            out["bound_role"] = bound
            out["reason"] = (
                f"{head}. The {work_role} ranks waited on the queue for {shares[work_role]:.0%} of their counted step "
                f"time, the {bound} ranks for {shares[bound]:.0%}: the {bound}s set the job's rate (in steady state the "
                f"{work_role}s take what they make), while a {work_role}'s own rate swings with how much of a queued "
                f"backlog it drains at its own speed; so the job's value is the throughput of the {bound} ranks "
                f"(their steps' rates added up), the job's as long as the {work_role}s keep up, which the comparison checks")
        else:
            who = f"the {work_role} ranks" if work_role else "every rank"
            waits = (f" ({', '.join(f'{r} {v:.0%}' for r, v in shares.items())} of their counted step time waited on "
                     "the queue)" if shares else "")
            out["reason"] = f"{head}, so the job's value is the throughput of {who} (their steps' rates added up){waits}"
        return out
    return {"kind": "independent", "work_role": work_role,
            "reason": f"no collective in most steps (rank {low}: {frac[low]:.0%}) and no queue wait: the ranks do not "
                      "synchronize, so the job's value is its throughput over "
                      + (f"the {work_role} ranks" if work_role else "every rank")}


def of_snapshot(snapshot: dict, store_root, skip_steps: int = 0) -> dict:
    """classify() on the snapshot's tables read back from the store."""
    from ..snapshot.build import load_tables

    inc = load_tables(snapshot, store_root)
    roles = {int(r): str(v) for r, v in ((snapshot.get("job") or {}).get("roles") or {}).items()}
    return classify(inc, roles, skip_steps)
