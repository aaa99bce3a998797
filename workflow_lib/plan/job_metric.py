"""The job metric: one value per step of a multi-process run, from every rank's steps-out.

The trial runner gives each process of a run its own steps-out file (STALLCASE_STEPS_OUT_DIR,
capture/recorder.py `steps_out_name`). How the ranks' step times become the run's values is
`trials.metric.job` (config), resolved into the plan so every block reads the same thing:

- `slowest_rank`: for each step index that every selected rank reached, the slowest rank's
  time at that index. A synchronous job advances at its slowest rank, and a rank that ran
  extra steps while the others finished does not dilute it.
- `throughput`: the selected ranks' rates added up (they run side by side), one value per run,
  ns per unit (the reciprocal is the job's steps, items or tokens per second). A rank's rate
  is read over consecutive windows of WINDOW_STEPS counted steps (work over time in each) and
  summarized by the plan's statistic: with the default, median, the steps a rank spends while
  another process of the job starts, exits or writes its capture, or while the machine runs
  something else, do not move it, as they do not move a one-process run's median step; a
  window of a few steps, not one step, because a consumer that takes every queued item at
  once has bursts of fast steps followed by a long wait (one step's median would read the
  burst as its rate). `statistic: mean` is the exact total: each rank's counted work over its
  counted time. A pipeline's consumers are not in step, so this, not a per-index maximum, is
  what a fix changes (docs/statistics.md §13 has the per-run spread of each form).
- `wall`: the run's process wall time (the launcher's), one value per run.

Which one is the default is decided from the job's shape (job_shape.py: collectives every
step -> slowest_rank; queues, pipes or no synchronization -> throughput of the role that does
the work), before any trial runs, and the plan records the shape and why (`shape`).
`trials.metric.role` (e.g. `consumer`) or `trials.metric.ranks` select the ranks whose
steps count; a role counts each run's own processes of that role, as many as the arm runs.
The plan records the ranks the incident held (`expect_ranks`): a run in which one of them
wrote no steps fails, naming the rank.

Every run also records the other job metrics it could be judged by (`alternates`, keyed by the
config that selects them): the comparison estimates each with its own A/A floor, reports each
role's throughput and time per step, and names one with a small floor when the chosen one
cannot conclude.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from ..capture.types import StepsOut
from ..core import typed
from ..core.errors import RecordError
from ..core.typed import ABSENT

JOBS = ("slowest_rank", "wall", "throughput")


class JobMetricUnreadable(ValueError):
    """A rank's steps are missing or unreadable: the run failed, and the message names the rank."""


def resolve(metric: dict, snapshot: dict, shape: dict | None = None) -> dict:
    """The plan's job metric fields for this incident: which ranks are expected, which count,
    and (with the job's `shape`, job_shape.classify) the default metric with its reason."""
    out = dict(metric)
    ranks = sorted(int(r) for r in snapshot.get("ranks") or [])
    roles = {int(r): str(v) for r, v in ((snapshot.get("job") or {}).get("roles") or {}).items()}
    chosen_by_config = any(out.get(k) is not None for k in ("job", "role", "ranks"))
    if shape is not None:
        if out.get("job") is None:
            out["job"] = "slowest_rank" if shape["kind"] == "collective" else "throughput"
        if out["job"] != "slowest_rank" and out.get("role") is None and out.get("ranks") is None and shape.get("work_role"):
            out["role"] = shape["work_role"]
        out["shape"] = {"kind": shape["kind"], "reason": shape["reason"],
                        "chosen_by": "config" if chosen_by_config else "recording"}
        out["shape"].update({k: shape[k] for k in ("wait_share", "bound_role") if shape.get(k) is not None})
    out.setdefault("job", "slowest_rank")
    if out["job"] not in JOBS:
        raise RecordError("trials.metric.job", f"{out['job']!r}: use one of {', '.join(JOBS)}")
    role, chosen = out.get("role"), out.get("ranks")
    if role is not None and chosen is not None:
        raise RecordError("trials.metric", "give role or ranks, not both")
    if role is not None:
        chosen = sorted(r for r, v in roles.items() if v == role)
        if not chosen:
            raise RecordError("trials.metric.role", f"no rank of incident {snapshot['incident_id']} has role {role!r}"
                              f" (its roles: {', '.join(sorted(set(roles.values()))) or 'none declared'})")
    elif chosen is not None:
        unknown = sorted(set(chosen) - set(ranks))
        if unknown:
            raise RecordError("trials.metric.ranks", f"rank(s) {unknown} are not in incident {snapshot['incident_id']} "
                              f"(its ranks: {ranks})")
    out["expect_ranks"] = ranks
    out["ranks"] = sorted(chosen) if chosen is not None else None
    return out


def read_dir(steps_dir: Path) -> list[StepsOut]:
    """Every process's steps-out record in the run's directory, ordered by rank then pid."""
    recs = []
    for p in sorted(Path(steps_dir).glob("steps-*.json")):
        try:
            recs.append(typed.parse(p.read_bytes(), StepsOut, p))
        except RecordError as exc:
            raise JobMetricUnreadable(exc.oneline()) from None
    return sorted(recs, key=lambda r: (r.rank is None, r.rank or 0, r.pid or 0))


def _name(rec: StepsOut) -> str:
    who = f"rank {rec.rank}" if rec.rank is not None else f"pid {rec.pid if rec.pid is not ABSENT else None}"
    return who + (f" ({rec.role})" if rec.role else "")


def _per_unit(steps: list[float], work, per: str, who: str) -> list[float]:
    if per == "step":
        return steps
    if work is None:
        raise JobMetricUnreadable(f"{who}: metric per {per}, but no step declared its {per}s")
    out = []
    for k, (t, n) in enumerate(zip(steps, work)):
        if not n:
            raise JobMetricUnreadable(f"{who}: metric per {per}, but step {k} declared {n!r} {per}s")
        out.append(t / n)
    return out


def reduce(metric: dict, recs: list[StepsOut], wall_ns: int) -> dict:
    """{"values_ns", "ranks", "unusual"}: the job's values and each counted rank's own median."""
    per, skip, job = metric.get("per", "step"), int(metric.get("skip_steps", 0)), metric.get("job", "slowest_rank")
    by_rank = {r.rank: r for r in recs if r.rank is not None}
    missing = [r for r in metric.get("expect_ranks") or [] if r not in by_rank or not by_rank[r].steps_ns]
    if missing:
        raise JobMetricUnreadable(f"rank {missing[0]} wrote no steps" + (f" (nor rank(s) {missing[1:]})" if missing[1:] else ""))
    chosen, role = metric.get("ranks"), metric.get("role")
    if role is not None:  # this run's processes of the role: an arm may run more of them (the fix: more producers)
        counted = [r for r in recs if r.role == role and r.steps_ns]
    else:
        counted = [by_rank[r] for r in chosen] if chosen is not None else [r for r in recs if r.steps_ns]
    if not counted:
        raise JobMetricUnreadable("no process of the run reported a step" + (f" as a {role}" if role else ""))
    series, summary = [], []
    for rec in counted:
        who = _name(rec)
        vals = _per_unit([float(v) for v in rec.steps_ns], rec.work_of(per), per, who)[skip:]
        if not vals:
            raise JobMetricUnreadable(f"{who} reported {len(rec.steps_ns)} step(s), none after skip_steps={skip}")
        series.append(vals)
        summary.append({"rank": rec.rank, "role": rec.role, "steps": len(vals),
                        "median_ns": float(median(vals)), "total_ns": float(sum(rec.steps_ns[skip:]))})
    if job == "wall":
        values = [float(wall_ns)]
    elif job == "throughput":
        values = [_throughput(counted, per, skip, metric.get("statistic", "median"))]
    else:
        values = _slowest(series)
    unusual = [f"{_name(r)}: {u}" for r in recs for u in r.unusual]
    for s in summary:
        s["counted"] = True
    counted_ids = {id(r) for r in counted}
    for rec in recs:  # the other ranks, so the comparison can report every role
        if id(rec) not in counted_ids and len(rec.steps_ns) > skip:
            vals = [float(v) for v in rec.steps_ns][skip:]
            summary.append({"rank": rec.rank, "role": rec.role, "steps": len(vals), "median_ns": float(median(vals)),
                            "total_ns": float(sum(vals)), "counted": False})
    return {"values_ns": values, "ranks": summary, "unusual": unusual,
            "alternates": alternates(metric, recs, wall_ns)}


def _slowest(series: list[list[float]]) -> list[float]:
    n = min(len(s) for s in series)
    return [max(s[k] for s in series) for k in range(n)]


# Steps per window of a rank's rate (`throughput`): a few, so a burst of fast steps from a queue
# drained at once sits inside one window with the wait that follows it; few enough that a
# 25-step run has 8 windows for the median (docs/statistics.md §13).
WINDOW_STEPS = 3


def _rank_rate(steps: list[float], work: list[float], statistic: str, who: str) -> float:
    """Units per ns of one rank: over windows of WINDOW_STEPS steps, the statistic's window
    (median, fastest for `min`), or its whole counted work over its whole counted time (`mean`)."""
    if statistic == "mean" or len(steps) < WINDOW_STEPS:
        windows = [(sum(work), sum(steps))]
    else:
        windows = [(sum(work[i:i + WINDOW_STEPS]), sum(steps[i:i + WINDOW_STEPS]))
                   for i in range(0, len(steps) - WINDOW_STEPS + 1, WINDOW_STEPS)]
    if any(t <= 0 for _, t in windows):
        raise JobMetricUnreadable(f"job metric throughput: {who} reported steps that took no time")
    rates = [w / t for w, t in windows]
    return max(rates) if statistic == "min" else float(median(rates))


def _throughput(counted: list[StepsOut], per: str, skip: int, statistic: str = "median") -> float:
    """ns per unit of work of the counted ranks together: their rates add (they run side by side)."""
    rate = 0.0
    for rec in counted:
        steps = [float(v) for v in rec.steps_ns[skip:]]
        if not steps:
            raise JobMetricUnreadable(f"job metric throughput: {_name(rec)} reported no step after skip_steps")
        if per == "step":
            work = [1.0] * len(steps)
        else:
            work = [float(v or 0) for v in (rec.work_of(per) or [])[skip:]]
            if len(work) != len(steps) or not all(work):
                raise JobMetricUnreadable(f"job metric throughput per {per} needs every counted step's declared "
                                          f"{per}s (rec.step(i, {per}s=...)); {_name(rec)} left some out")
        rate += _rank_rate(steps, work, statistic, _name(rec))
    return 1.0 / rate


_STAT = {"median": median, "mean": lambda v: sum(v) / len(v), "min": min}


def selector(job: str, role: str | None) -> str:
    """The key of an alternate metric: what `trials.metric` would say to select it."""
    return f"job={job}" + (f",role={role}" if role else "")


def config_line(key: str) -> str:
    """'job=throughput,role=consumer' -> 'trials: {metric: {job: throughput, role: consumer}}'."""
    parts = ", ".join(f"{k}: {v}" for k, v in (p.split("=", 1) for p in key.split(",")))
    return f"trials: {{metric: {{{parts}}}}}"


def alternates(metric: dict, recs: list[StepsOut], wall_ns: int) -> dict[str, float]:
    """The run's value under each other job metric (slowest rank per step, throughput), over every
    rank and over each declared role: key (selector) -> the plan's statistic of its values."""
    per, skip = metric.get("per", "step"), int(metric.get("skip_steps", 0))
    stat = _STAT.get(metric.get("statistic", "median"), median)
    groups: dict[str | None, list[StepsOut]] = {None: [r for r in recs if len(r.steps_ns) > skip]}
    for rec in recs:
        if rec.role and len(rec.steps_ns) > skip:
            groups.setdefault(rec.role, []).append(rec)
    out: dict[str, float] = {}
    for role, members in groups.items():
        if not members:
            continue
        try:
            series = [_per_unit([float(v) for v in r.steps_ns], r.work_of(per), per, _name(r))[skip:] for r in members]
            out[selector("slowest_rank", role)] = float(stat(_slowest(series)))
            out[selector("throughput", role)] = _throughput(members, per, skip, metric.get("statistic", "median"))
        except JobMetricUnreadable:
            continue  # a unit some rank did not declare: that alternate does not exist for this run
    return out


def describe(metric: dict) -> str:
    """What the job's value is, for people (metric.describe adds it for multi-rank plans)."""
    job = metric.get("job", "slowest_rank")
    who = (f"the {metric['role']} ranks" if metric.get("role") else
           f"ranks {metric['ranks']}" if metric.get("ranks") else "every rank")
    return {"slowest_rank": f"per step index reached by {who}, the slowest rank's time",
            "wall": "the job's wall time",
            "throughput": f"{who}'s rates added up, each " + (
                "its counted work over its counted time" if metric.get("statistic") == "mean" else
                f"the {metric.get('statistic', 'median')} over windows of {WINDOW_STEPS} steps") + " (1/throughput)"}[job]
