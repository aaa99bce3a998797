"""The trial metric: what one run's value is, and how it is read.

`trials.metric` (config) says where a run's numbers come from (`source`) and what unit of
work they are per (`per`):

- `recorder_steps`: per-step durations the workload's FlightRecorder writes to the file
  named by STALLCASE_STEPS_OUT (schemas/steps_out.schema.json). Steps cover the whole
  iteration (capture/recorder.py), so this is iteration time.
- `stdout_regex`: the first group of `regex` in the run's output, one value per run.
- `stdout_steps`: every match of `step_pattern` (a `stallcase record --step-pattern`
  regex with a named duration group ns/us/ms/s) in the output, one value per step.
- `process_wall`: the run's process wall time, one value per run. This is what a workload
  without steps gets (`stallcase record` without `--step-pattern`, a Kineto import whose
  program does not use the recorder).
- `auto` (the default): recorder steps when the run wrote them, else the step pattern's
  lines when the plan carries one, else process wall time. Every run records the source
  it used, and a block never mixes sources.

`per: step` (default) compares time per step; `per: item` or `per: token` divides each
step's time by the items or tokens the step declared (`rec.step(i, items=...)`), so arms
that do different work per step are compared per unit. Throughput is the reciprocal
(1e9 / value units per second): a verdict on time per unit is the verdict on throughput.

A run of several processes (ranks, roles) writes one steps-out per process; how they
become the run's values (the slowest rank per step by default, a role, ranks, the job's
wall time or throughput) is job_metric.py, resolved into the plan when the incident has ranks.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from . import job_metric
from ..capture.types import StepsOut
from ..core import typed
from ..core.errors import RecordError

SOURCES = ("auto", "recorder_steps", "stdout_regex", "stdout_steps", "process_wall")
PER = ("step", "item", "token")
DURATION_GROUPS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


class MetricUnreadable(ValueError):
    """The run finished but its metric cannot be read: the same every time it is run."""


def resolve(metric: dict, snapshot: dict) -> dict:
    """The plan's metric for this incident: `auto` learns the step pattern a sidecar recorded.

    Called when the plan is built, so every block reads the same thing."""
    out = dict(metric)
    out.setdefault("per", "step")
    if out.get("source", "auto") == "auto":
        steps = (snapshot.get("recorder") or {}).get("steps") or {}
        if steps.get("from") == "step_pattern" and steps.get("step_pattern"):
            out["step_pattern"] = steps["step_pattern"]
    # A job of several processes (or one its launcher started) is measured as a job; one
    # process whose trace names its rank (a Kineto import of rank 0) is not: its rerun need
    # not set RANK, and expecting rank 0 to write steps would fail every run.
    job = snapshot.get("job") or {}
    several = len(snapshot.get("ranks") or []) > 1 or bool(job.get("launcher")) or (job.get("world_size") or 0) > 1
    if several or any(out.get(k) is not None for k in ("job", "role", "ranks")):
        out = job_metric.resolve(out, snapshot)
    if out["per"] != "step" and out["source"] in ("stdout_regex", "stdout_steps", "process_wall"):
        raise RecordError("trials.metric.per", f"per: {out['per']} needs each step's declared work, which "
                          f"source {out['source']} does not carry; use source recorder_steps or auto")
    return out


def describe(metric: dict) -> str:
    """One line for people: what a run's value is."""
    per = metric.get("per", "step")
    src = metric.get("source", "auto")
    what = {"recorder_steps": "the recorder's iteration times", "stdout_regex": "a number printed by the run",
            "stdout_steps": "the step-time lines the run prints", "process_wall": "the run's process wall time",
            "auto": "the recorder's iteration times when the run reports them, else "
                    + ("its step-time lines" if metric.get("step_pattern") else "its process wall time")}[src]
    job = f" ({job_metric.describe(metric)})" if "expect_ranks" in metric else ""
    return f"{metric.get('statistic', 'median')} of {what}{job}, ns per {per}"


def _steps_file(path: Path) -> StepsOut:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MetricUnreadable("the run wrote no STALLCASE_STEPS_OUT file (does its loop use the FlightRecorder?)") from None
    try:
        return typed.parse(data, StepsOut, path)
    except RecordError as exc:
        raise MetricUnreadable(exc.oneline()) from None


def _per_unit(steps: list[float], work: list | None, per: str) -> list[float]:
    if per == "step":
        return steps
    if work is None:
        raise MetricUnreadable(f"metric per {per}, but no step declared its {per}s (rec.step(i, {per}s=...))")
    out = []
    for k, (t, n) in enumerate(zip(steps, work)):
        if not n:
            raise MetricUnreadable(f"metric per {per}, but step {k} declared {n!r} {per}s")
        out.append(t / n)
    return out


def _work(data: StepsOut, skip: int) -> dict | None:
    out = {}
    for key in ("items", "tokens"):
        vals = [v for v in (getattr(data, key) or [])[skip:] if v is not None]
        out[f"{key}_per_step"] = float(median(vals)) if vals else None
    return out if any(v is not None for v in out.values()) else None


def _pattern(pattern, what: str, **kw):
    """The user's pattern on the linear-time engine (the workload's output is not ours)."""
    from ..core.errors import InputError
    from ..core.patterns import compile_pattern

    try:
        return compile_pattern(pattern, what, **kw)
    except InputError as exc:
        raise MetricUnreadable(exc.oneline()) from None


def _stdout_steps(pattern: str, text: str) -> list[float]:
    rx = _pattern(pattern, "metric step_pattern")
    unit = next((g for g in DURATION_GROUPS if g in rx.groupindex), None)
    if unit is None:
        raise MetricUnreadable(f"step pattern {pattern!r} has no duration group (ns, us, ms or s)")
    vals = []
    for line in text.splitlines():
        m = rx.search(line)
        if m is not None and m.group(unit) is not None:
            try:
                vals.append(float(m.group(unit)) * DURATION_GROUPS[unit])
            except ValueError:
                continue
    return vals


def read(metric: dict, steps_file: Path, output: str, wall_ns: int, steps_dir: Path | None = None) -> dict:
    """One finished run's values: {"values_ns", "unusual", "source", "work"} (and "ranks", each
    counted rank's own median, when the run had several processes).

    Raises MetricUnreadable when the run's metric cannot be read (deterministic: retrying
    the run reads nothing more)."""
    src = metric.get("source", "auto")
    per = metric.get("per", "step")
    skip = int(metric.get("skip_steps", 0))
    procs = job_metric.read_dir(steps_dir) if steps_dir is not None and Path(steps_dir).is_dir() else []
    if procs and src in ("auto", "recorder_steps") and (len(procs) > 1 or "expect_ranks" in metric):
        try:
            got = job_metric.reduce(metric, procs, wall_ns)
        except job_metric.JobMetricUnreadable as exc:
            raise MetricUnreadable(str(exc)) from None
        work = _work(procs[0], skip) if len(procs) == 1 else None
        return {"values_ns": got["values_ns"], "unusual": got["unusual"], "source": "recorder_steps",
                "work": work, "ranks": got["ranks"]}
    if len(procs) == 1:  # one process: its file is the run's steps-out
        steps_file = sorted(Path(steps_dir).glob("steps-*.json"))[0]
    if src == "auto":
        if Path(steps_file).exists():
            src = "recorder_steps"
        elif metric.get("step_pattern"):
            src = "stdout_steps"
        else:
            src = "process_wall"
    if src == "recorder_steps":
        data = _steps_file(Path(steps_file))
        steps = [float(v) for v in data.steps_ns]
        work = data.work_of(per)
        values = _per_unit(steps, work, per)[skip:]
        if not values:
            raise MetricUnreadable(f"the run reported {len(steps)} step(s), none after skip_steps={skip}")
        return {"values_ns": values, "unusual": [str(u) for u in data.unusual], "source": src,
                "work": _work(data, skip)}
    if src == "stdout_steps":
        values = _stdout_steps(metric["step_pattern"], output)[skip:]
        if not values:
            raise MetricUnreadable(f"no line of the run's output matched the step pattern {metric['step_pattern']!r} "
                                   f"(after skip_steps={skip})")
        return {"values_ns": values, "unusual": [], "source": src, "work": None}
    if src == "stdout_regex":
        if not isinstance(metric.get("regex"), str):  # a hand-edited plan; the config check refuses it first
            raise MetricUnreadable("metric source 'stdout_regex' has no regex to read the metric with")
        m = _pattern(metric["regex"], "metric regex", multiline=True).search(output)
        if not m:
            raise MetricUnreadable(f"metric regex {metric['regex']!r} matched nothing in the output")
        try:
            return {"values_ns": [float(m.group(1))], "unusual": [], "source": src, "work": None}
        except (IndexError, ValueError) as exc:
            raise MetricUnreadable(f"metric regex {metric['regex']!r}: {exc}") from None
    if src == "process_wall":
        return {"values_ns": [float(wall_ns)], "unusual": [], "source": src, "work": None}
    raise MetricUnreadable(f"unknown metric source {src!r}; use one of {', '.join(SOURCES)}")

