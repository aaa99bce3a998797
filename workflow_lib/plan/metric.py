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
step's time by the items or tokens the step did, so arms that do different work per step are
compared per unit. The work comes from the recorder (`rec.step(i, items=...)`), a named group
of the step pattern (`(?P<tokens>...)`) or the config (`tokens_per_step: "--batch_size * --bptt"`,
evaluated from each arm's own argv); a metric per unit whose runs cannot all say their work is
refused when the plan is made (work.py). Throughput is the reciprocal (1e9 / value units per
second): a verdict on time per unit is the verdict on throughput.

A run of several processes (ranks, roles) writes one steps-out per process; how they
become the run's values (the slowest rank per step by default, a role, ranks, the job's
wall time or throughput) is job_metric.py, resolved into the plan when the incident has ranks.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from . import job_metric
from . import work as work_mod
from ..capture.types import StepsOut
from ..core import typed
from ..core.config import values as config_values
from ..core.errors import RecordError

SOURCES = ("auto", "recorder_steps", "stdout_regex", "stdout_steps", "process_wall")
PER = ("step", "item", "token")
DURATION_GROUPS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


class MetricUnreadable(ValueError):
    """The run finished but its metric cannot be read: the same every time it is run."""


def resolve(metric: dict, snapshot: dict, store_root=None, arms: dict | None = None) -> dict:
    """The plan's metric for this incident: `auto` learns the step pattern a sidecar recorded,
    a job's default metric comes from its shape (job_shape.py, read from the store's tables
    when `store_root` is given), and a metric per item or token must say where each step's
    work comes from (work.py), or it is refused here, before any trial runs.

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
        shape = None
        if several and store_root is not None and len(snapshot.get("ranks") or []) > 1:
            from . import job_shape

            shape = job_shape.of_snapshot(snapshot, store_root, int(out.get("skip_steps") or 0))
        out = job_metric.resolve(out, snapshot, shape)
    if arms is not None:
        decl = work_mod.declared(out, arms)
        if decl is not None:
            out["declared_work"] = decl
    _check_work_known(out)
    return out


def _check_work_known(metric: dict) -> None:
    """Refuse a metric per item/token whose runs could not all say their work (issue: a value
    labelled 'ns per token' that is a time per step is the worst kind of wrong)."""
    per, src = metric["per"], metric.get("source", "auto")
    if per == "step":
        return
    if metric.get("declared_work"):
        return
    if src in ("stdout_regex", "process_wall"):
        raise RecordError("trials.metric.per", f"per: {per} needs each run's work, which source {src} does not carry; "
                          f"declare it: trials.metric.{per}s_per_step: \"--flag * --flag\" (from each arm's argv)")
    pattern = metric.get("step_pattern")
    if src == "stdout_steps" or (src == "auto" and pattern):
        if f"{per}s" not in work_mod.pattern_groups(pattern):
            raise RecordError("trials.metric.per", f"per: {per}, but the step pattern {pattern!r} has no (?P<{per}s>...) "
                              f"group and the config declares no {per}s_per_step: runs recorded from outside say no work "
                              f"per step; add the group, or trials.metric.{per}s_per_step: \"--batch_size * --bptt\"")


def check_config(metric: dict) -> None:
    """The part of the refusal the config alone decides (core/config/values.py runs it): a metric per
    item/token from a source that never carries work, with no declaration."""
    if not isinstance(metric, dict):
        return
    for key in ("items_per_step", "tokens_per_step"):
        if metric.get(key) is not None:
            work_mod.check_expression(metric[key], f"trials.metric.{key}")
    if metric.get("cpu_wait", "counted") == "removed" and metric.get("source", "auto") not in ("auto", "stdout_steps"):
        raise RecordError("trials.metric.cpu_wait", f"cpu_wait: removed reads step-pattern lines as they arrive "
                          f"(source stdout_steps or auto with a step pattern), not source {metric.get('source')}")
    if metric.get("per", "step") == "step":
        return
    if any(metric.get(k) is not None for k in ("items_per_step", "tokens_per_step")):
        return
    if metric.get("source") in ("stdout_regex", "process_wall"):
        _check_work_known(dict(metric, per=metric["per"]))


config_values.register(check_config)


def describe(metric: dict) -> str:
    """One line for people: what a run's value is."""
    per = metric.get("per", "step")
    src = metric.get("source", "auto")
    what = {"recorder_steps": "the recorder's iteration times", "stdout_regex": "a number printed by the run",
            "stdout_steps": "the step-time lines the run prints", "process_wall": "the run's process wall time",
            "auto": "the recorder's iteration times when the run reports them, else "
                    + ("its step-time lines" if metric.get("step_pattern") else "its process wall time")}[src]
    job = f" ({job_metric.describe(metric)})" if "expect_ranks" in metric else ""
    less = ", less the run's waits for a CPU" if metric.get("cpu_wait", "counted") == "removed" else ""
    return f"{metric.get('statistic', 'median')} of {what}{job}{less}, ns per {per}"


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


def _stdout_steps(pattern: str, text: str) -> tuple[list[float], dict[str, list]]:
    """The durations the pattern matched, and per work group (`tokens`, `items`) each line's work."""
    rx = _pattern(pattern, "metric step_pattern")
    unit = next((g for g in DURATION_GROUPS if g in rx.groupindex), None)
    if unit is None:
        raise MetricUnreadable(f"step pattern {pattern!r} has no duration group (ns, us, ms or s)")
    groups = [g for g in work_mod.WORK_GROUPS if g in rx.groupindex]
    vals, work = [], {g: [] for g in groups}
    for line in text.splitlines():
        m = rx.search(line)
        if m is not None and m.group(unit) is not None:
            try:
                v = float(m.group(unit)) * DURATION_GROUPS[unit]
                w = {g: (float(m.group(g)) if m.group(g) is not None else None) for g in groups}
            except ValueError:
                continue
            vals.append(v)
            for g in groups:
                work[g].append(w[g])
    return vals, work


CPU_WAIT = ("counted", "removed")


def _less_cpu_wait(pattern: str, streams: list[tuple[str, list]]) -> tuple[list[float], dict[str, list]]:
    """The pattern's durations with the run's wait for a CPU taken out (`cpu_wait: removed`): each
    matched line's duration times (1 - wait/wall) over the time since the stream's previous
    matched line (its start for the first), from when each line arrived (trials/line_clock.py)."""
    vals, work = [], {}
    for text, clock in streams:
        lines = text.split("\n")
        prev = (0, 0)
        for k, (wall, wait) in enumerate(clock):
            got_v, got_w = _stdout_steps(pattern, lines[k]) if k < len(lines) else ([], {})
            if not got_v:
                continue
            if wait < 0:
                raise MetricUnreadable("cpu_wait: removed, but the run's wait for a CPU could not be read "
                                       "(/proc/<pid>/task/<tid>/schedstat)")
            span, waited = wall - prev[0], wait - prev[1]
            if span <= 0 or waited > span:
                raise MetricUnreadable(f"cpu_wait: removed, but the run waited {waited / 1e6:.1f} ms for a CPU in "
                                       f"{span / 1e6:.1f} ms between two lines: several of its threads waited at "
                                       f"once, and one line's time cannot lose their sum")
            vals.append(got_v[0] * (1 - waited / span))
            for g, w in got_w.items():
                work.setdefault(g, []).append(w[0])
            prev = (wall, wait)
    return vals, work


def _declared_work(metric: dict, entry: dict | None, n: int) -> tuple[dict[str, list], str] | None:
    """Per step, the work the config declared for this run's arm (the plan evaluated it from the arm's argv)."""
    decl = metric.get("declared_work")
    if not decl or entry is None:
        return None
    arm = "B" if "B" in (entry.get("arm"), entry.get("warms")) else "A"
    return {f"{decl['unit']}s": [float(decl[arm])] * n}, arm


def _work_lists(work: dict[str, list], skip: int) -> dict | None:
    out = {}
    for key in ("items", "tokens"):
        vals = [v for v in (work.get(key) or [])[skip:] if v is not None]
        out[f"{key}_per_step"] = float(median(vals)) if vals else None
    return out if any(v is not None for v in out.values()) else None


def _recorder_declared(steps: list[float], work: dict[str, list], per: str, skip: int, data: StepsOut) -> dict:
    values = _per_unit(steps, work.get(f"{per}s") if per != "step" else None, per)[skip:]
    if not values:
        raise MetricUnreadable(f"the run reported {len(steps)} step(s), none after skip_steps={skip}")
    return {"values_ns": values, "unusual": [str(u) for u in data.unusual], "source": "recorder_steps",
            "work": _work_lists(work, skip)}


def read(metric: dict, steps_file: Path, output: str, wall_ns: int, steps_dir: Path | None = None,
         entry: dict | None = None, streams: list[tuple[str, list]] | None = None) -> dict:
    """One finished run's values: {"values_ns", "unusual", "source", "work"} (and "ranks", each
    counted rank's own median, when the run had several processes).

    `streams`, with `cpu_wait: removed`: the run's stdout and stderr, each with its lines'
    (arrival ns, run-queue wait ns) from trials/line_clock.py.

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
                "work": work, "ranks": got["ranks"], "alternates": got["alternates"]}
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
        decl = _declared_work(metric, entry, len(steps))
        if work is None and decl is not None:
            return _recorder_declared(steps, decl[0], per, skip, data)
        values = _per_unit(steps, work, per)[skip:]
        if not values:
            raise MetricUnreadable(f"the run reported {len(steps)} step(s), none after skip_steps={skip}")
        return {"values_ns": values, "unusual": [str(u) for u in data.unusual], "source": src,
                "work": _work(data, skip)}
    if metric.get("cpu_wait", "counted") == "removed" and src != "stdout_steps":
        raise MetricUnreadable(f"cpu_wait: removed reads the step pattern's lines as they arrive; this run's metric "
                               f"came from {src}")
    if src == "stdout_steps":
        if metric.get("cpu_wait", "counted") == "removed":
            if streams is None:
                raise MetricUnreadable("cpu_wait: removed, but the runner noted no line's wait for a CPU")
            steps, work = _less_cpu_wait(metric["step_pattern"], streams)
        else:
            steps, work = _stdout_steps(metric["step_pattern"], output)
        decl = _declared_work(metric, entry, len(steps))
        if decl is not None:
            work = decl[0]
        values = _per_unit(steps, work.get(f"{per}s") if per != "step" else None, per)[skip:]
        if not values:
            raise MetricUnreadable(f"no line of the run's output matched the step pattern {metric['step_pattern']!r} "
                                   f"(after skip_steps={skip})")
        return {"values_ns": values, "unusual": [], "source": src, "work": _work_lists(work, skip)}
    if src == "stdout_regex":
        if not isinstance(metric.get("regex"), str):  # a hand-edited plan; the config check refuses it first
            raise MetricUnreadable("metric source 'stdout_regex' has no regex to read the metric with")
        m = _pattern(metric["regex"], "metric regex", multiline=True).search(output)
        if not m:
            raise MetricUnreadable(f"metric regex {metric['regex']!r} matched nothing in the output")
        decl = _declared_work(metric, entry, 1)
        if per != "step" and decl is None:
            raise MetricUnreadable(f"metric per {per}, but a number printed by the run is not per {per}: declare "
                                   f"{per}s_per_step")
        try:
            value = float(m.group(1))
            if decl is not None and per != "step":
                value = _per_unit([value], decl[0].get(f"{per}s"), per)[0]
            return {"values_ns": [value], "unusual": [], "source": src,
                    "work": _work_lists(decl[0], 0) if decl is not None else None}
        except (IndexError, ValueError) as exc:
            raise MetricUnreadable(f"metric regex {metric['regex']!r}: {exc}") from None
    if src == "process_wall":
        decl = _declared_work(metric, entry, 1)
        if decl is not None:
            unit_work = decl[0]
            return {"values_ns": _per_unit([float(wall_ns)], unit_work.get(f"{per}s") if per != "step" else None, per),
                    "unusual": [], "source": src, "work": _work_lists(unit_work, 0)}
        if per != "step":  # a wall time is never a time per unit
            raise MetricUnreadable(f"metric per {per}, but the run reported no steps and the config declares no "
                                   f"{per}s_per_step: its wall time is not a time per {per}")
        return {"values_ns": [float(wall_ns)], "unusual": [], "source": src, "work": None}
    raise MetricUnreadable(f"unknown metric source {src!r}; use one of {', '.join(SOURCES)}")

