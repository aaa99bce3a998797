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
- `independent`: neither collectives nor queues: the ranks do not synchronize, and the job's
  throughput over every rank is its value.

The shape and the reason are recorded in the plan (`design.metric.shape`); a metric the
user chose (`job`, `role`, `ranks`) is kept and the shape still says what was seen.
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
    return {"rank": values(t["rank"], null=-1), "start": values(t["start_ns"]),
            "name": np.asarray(t["name"].to_pylist(), dtype=object)}


def _steps_holding(starts: np.ndarray, ends: np.ndarray, at: np.ndarray) -> int:
    """How many steps [start, end) hold at least one of the times `at`."""
    if at.size == 0 or starts.size == 0:
        return 0
    k = np.searchsorted(starts, at, side="right") - 1
    ok = (k >= 0) & (at < ends[np.clip(k, 0, None)])
    return int(np.unique(k[ok]).size)


def classify(inc, roles: dict[int, str]) -> dict:
    """{"kind", "reason", "work_role"} for an incident of several ranks."""
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
        who = f"the {work_role} ranks" if work_role else "every rank"
        return {"kind": "pipeline", "work_role": work_role,
                "reason": f"ranks exchange work through a queue or pipe ({how}) and meet in no collective in most "
                          f"steps (rank {low}: {frac[low]:.0%}): they are not in step, so the job's value is the "
                          f"throughput of {who} (their steps' rates added up)"}
    return {"kind": "independent", "work_role": work_role,
            "reason": f"no collective in most steps (rank {low}: {frac[low]:.0%}) and no queue wait: the ranks do not "
                      "synchronize, so the job's value is its throughput over "
                      + (f"the {work_role} ranks" if work_role else "every rank")}


def of_snapshot(snapshot: dict, store_root) -> dict:
    """classify() on the snapshot's tables read back from the store."""
    from ..snapshot.build import load_tables

    inc = load_tables(snapshot, store_root)
    roles = {int(r): str(v) for r, v in ((snapshot.get("job") or {}).get("roles") or {}).items()}
    return classify(inc, roles)
