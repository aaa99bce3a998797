"""The job metric: one value per step of a multi-process run, from every rank's steps-out.

The trial runner gives each process of a run its own steps-out file (STALLCASE_STEPS_OUT_DIR,
capture/recorder.py `steps_out_name`). How the ranks' step times become the run's values is
`trials.metric.job` (config), resolved into the plan so every block reads the same thing:

- `slowest_rank` (default): for each step index that every selected rank reached, the
  slowest rank's time at that index. A synchronous job advances at its slowest rank, and a
  rank that ran extra steps while the others finished does not dilute it.
- `wall`: the run's process wall time (the launcher's), one value per run.
- `throughput`: wall time per item (or token) summed over the selected ranks, one value per
  run; the reciprocal is the job's items/s.

`trials.metric.role` (e.g. `consumer`) or `trials.metric.ranks` select the ranks whose
steps count; by default every rank. The plan records the ranks the incident held
(`expect_ranks`): a run in which one of them wrote no steps fails, naming the rank.
"""

from __future__ import annotations

from pathlib import Path

from ..capture.types import StepsOut
from ..core import typed
from ..core.errors import RecordError
from ..core.typed import ABSENT

JOBS = ("slowest_rank", "wall", "throughput")


class JobMetricUnreadable(ValueError):
    """A rank's steps are missing or unreadable: the run failed, and the message names the rank."""


def resolve(metric: dict, snapshot: dict) -> dict:
    """The plan's job metric fields for this incident: which ranks are expected, which count."""
    out = dict(metric)
    ranks = sorted(int(r) for r in snapshot.get("ranks") or [])
    roles = {int(r): str(v) for r, v in ((snapshot.get("job") or {}).get("roles") or {}).items()}
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
    from statistics import median

    per, skip, job = metric.get("per", "step"), int(metric.get("skip_steps", 0)), metric.get("job", "slowest_rank")
    by_rank = {r.rank: r for r in recs if r.rank is not None}
    missing = [r for r in metric.get("expect_ranks") or [] if r not in by_rank or not by_rank[r].steps_ns]
    if missing:
        raise JobMetricUnreadable(f"rank {missing[0]} wrote no steps" + (f" (nor rank(s) {missing[1:]})" if missing[1:] else ""))
    chosen = metric.get("ranks")
    counted = [by_rank[r] for r in chosen] if chosen is not None else [r for r in recs if r.steps_ns]
    if not counted:
        raise JobMetricUnreadable("no process of the run reported a step")
    series, summary = [], []
    for rec in counted:
        who = _name(rec)
        vals = _per_unit([float(v) for v in rec.steps_ns], rec.work_of(per), per, who)[skip:]
        if not vals:
            raise JobMetricUnreadable(f"{who} reported {len(rec.steps_ns)} step(s), none after skip_steps={skip}")
        series.append(vals)
        summary.append({"rank": rec.rank, "role": rec.role, "steps": len(vals),
                        "median_ns": float(median(vals))})
    if job == "wall":
        values = [float(wall_ns)]
    elif job == "throughput":
        key = "items" if per == "step" else f"{per}s"
        total = sum(v or 0 for rec in counted for v in (getattr(rec, key) or [])[skip:])
        if not total:
            raise JobMetricUnreadable(f"job metric throughput needs the steps' declared {key} (rec.step(i, {key}=...))")
        values = [float(wall_ns) / total]
    else:
        n = min(len(s) for s in series)
        values = [max(s[k] for s in series) for k in range(n)]
    unusual = [f"{_name(r)}: {u}" for r in recs for u in r.unusual]
    return {"values_ns": values, "ranks": summary, "unusual": unusual}


def describe(metric: dict) -> str:
    """What the job's value is, for people (metric.describe adds it for multi-rank plans)."""
    job = metric.get("job", "slowest_rank")
    who = (f"the {metric['role']} ranks" if metric.get("role") else
           f"ranks {metric['ranks']}" if metric.get("ranks") else "every rank")
    return {"slowest_rank": f"per step index reached by {who}, the slowest rank's time",
            "wall": "the job's wall time", "throughput": f"the job's wall time per unit of work of {who}"}[job]
