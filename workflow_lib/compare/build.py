"""Comparison stage: plan + per-block executions -> the comparison record.

Each block is one paired experiment: its A, B and A' runs were interleaved on one
GPU in the plan's randomized order, so drift and node differences shared by the block
cancel in the within-block ratio. A block is used only when its execution is
`complete`, its failures stay within the plan's budget and it has successful A and B
runs; every other block is listed with the reason it was excluded and is never
averaged in. The statistics and the decision rule live in verdict.py and stats.py;
docs/statistics.md explains them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from . import by_component as compare_components, job_metrics, sequential, stats
from ..core import records
from . import verdict as V
from ..core.errors import RecordError
from ..plan.types import Design, Plan, PlanMetric, Stop
from ..trials.host_load import BUSY_NOTE, BUSY_SHARE
from ..trials.types import Execution
from .types import (BlockResult, Comparison, Counts, DesignSummary, Estimate, Interval, JobMetric, Mde, Method,
                    Metric, MetricChoice, NoiseFloor, Sequential)
from ..plan import work as work_mod

MEASURED_ARMS = ("A", "B", "A'")

EXCLUSIONS = (
    "missing_execution",  # the plan has the block, no execution record came back
    "environment_changed",  # the runner saw the environment change mid-block
    "too_many_failures",  # the runner marked the block
    "failed_fraction_exceeded",  # marked complete, but more runs failed than design allows
    "no_successful_baseline",  # no A run succeeded: nothing to pair with
    "no_successful_candidate",  # no B run succeeded
    "bad_metric",  # a successful run without a positive, finite metric
)


@dataclass(frozen=True)
class BlockEstimate:
    """One block's paired estimate, or why it was excluded."""

    block: str  # block id, b000...
    execution_status: str  # complete | too_many_failures | environment_changed | missing
    exclusion: str | None  # one of EXCLUSIONS, None when the block is used
    runs_planned: dict[str, int]  # measured runs per arm in the schedule
    runs_ok: dict[str, int]  # runs per arm with a successful attempt
    failed_runs: int  # planned measured runs without any successful attempt
    failed_attempts: int  # attempts that failed, retried ones included
    unusual_runs: int  # runs whose recorder reported anything unusual
    median_ns: dict[str, float | None]  # median metric per arm over successful runs
    log_ratio: float | None  # log(median B / median A)
    control_log_ratio: float | None  # log(median A' / median A); None without A' runs

    @property
    def used(self) -> bool:
        return self.exclusion is None

    def to_record(self) -> BlockResult:
        return BlockResult(
            block=self.block, used=self.used, execution_status=self.execution_status,
            exclusion=self.exclusion, runs_planned=self.runs_planned, runs_ok=self.runs_ok,
            failed_runs=self.failed_runs, failed_attempts=self.failed_attempts,
            unusual_runs=self.unusual_runs, median_ns=self.median_ns,
            log_ratio=self.log_ratio, control_log_ratio=self.control_log_ratio,
        )


def _successful_values(block: str, planned: list[dict], execution: Execution) -> tuple[dict[int, float | None], int, int]:
    """Per planned measured index, the metric of its successful attempt (absent if none)."""
    arm_of = {int(r["index"]): r["arm"] for r in planned}
    ok: dict[int, float | None] = {}
    failed_attempts = unusual = 0
    for run in execution.runs:
        index = int(run.index)
        if arm_of.get(index) != run.arm:
            raise RecordError(
                f"execution/{block}.json",
                f"run {index} is arm {run.arm!r} but the plan's schedule has {arm_of.get(index)!r}; "
                "the execution does not follow this plan",
            )
        if run.arm == "warmup":
            continue
        unusual += bool(run.unusual)
        if run.status == "ok":
            ok[index] = run.metric_ns
        else:
            failed_attempts += 1
    return ok, failed_attempts, unusual


def _excluded(block: str, status: str, why: str, planned: dict[str, int], **kw) -> BlockEstimate:
    empty = {arm: 0 for arm in MEASURED_ARMS}
    return BlockEstimate(
        block=block, execution_status=status, exclusion=why, runs_planned=planned,
        runs_ok=kw.get("runs_ok", empty), failed_runs=kw.get("failed_runs", sum(planned.values())),
        failed_attempts=kw.get("failed_attempts", 0), unusual_runs=kw.get("unusual_runs", 0),
        median_ns={arm: None for arm in MEASURED_ARMS}, log_ratio=None, control_log_ratio=None,
    )


def block_estimate(block: str, planned: list[dict], execution: Execution | None, design: Design, plan_digest: str) -> BlockEstimate:
    """Paired estimate for one block; exclusions are reported, errors in the inputs raised."""
    planned_counts = {arm: sum(r["arm"] == arm for r in planned) for arm in MEASURED_ARMS}
    if execution is None:
        return _excluded(block, "missing", "missing_execution", planned_counts)
    where = f"execution/{block}.json"
    if execution.block != block:
        raise RecordError(where, f"holds block {execution.block!r}, expected {block!r}")
    if execution.plan_digest != plan_digest:
        raise RecordError(where, "was run for a different plan (plan_digest differs); rerun the trials for this plan")
    status = execution.status
    ok, failed_attempts, unusual = _successful_values(block, planned, execution)
    measured = [r for r in planned if r["arm"] != "warmup"]
    values = {arm: [ok[r["index"]] for r in measured if r["arm"] == arm and r["index"] in ok] for arm in MEASURED_ARMS}
    runs_ok = {arm: len(v) for arm, v in values.items()}
    failed_runs = len(measured) - sum(runs_ok.values())
    common = dict(runs_ok=runs_ok, failed_runs=failed_runs, failed_attempts=failed_attempts, unusual_runs=unusual)
    if status != "complete":
        return _excluded(block, status, status, planned_counts, **common)
    if measured and failed_runs / len(measured) > float(design.max_failed_fraction):
        return _excluded(block, status, "failed_fraction_exceeded", planned_counts, **common)
    if not values["A"]:
        return _excluded(block, status, "no_successful_baseline", planned_counts, **common)
    if not values["B"]:
        return _excluded(block, status, "no_successful_candidate", planned_counts, **common)
    if any(v is None or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for vs in values.values() for v in vs):
        return _excluded(block, status, "bad_metric", planned_counts, **common)
    med = {arm: (float(np.median(v)) if v else None) for arm, v in values.items()}
    # Differences of logs, not logs of ratios: a ratio of extreme values can overflow.
    log_a = math.log(med["A"])
    control = math.log(med["A'"]) - log_a if med["A'"] is not None else None
    return BlockEstimate(
        block=block, execution_status=status, exclusion=None, runs_planned=planned_counts,
        median_ns=med, log_ratio=math.log(med["B"]) - log_a, control_log_ratio=control, **common,
    )


def _num(x) -> float | None:
    """JSON-safe float: NaN (not computable) becomes null."""
    x = float(x)
    return x if math.isfinite(x) else None


# exp() of a log ratio above this overflows a double; such a ratio is reported as null.
_MAX_LOG = 700.0


def _ratio(log_value: float) -> float | None:
    return math.exp(log_value) if math.isfinite(log_value) and abs(log_value) < _MAX_LOG else None


def _interval(est: float, lo: float, hi: float) -> dict:
    """The fields of an Interval (an Estimate adds change_pct)."""
    return dict(log_ratio=_num(est), log_low=_num(lo), log_high=_num(hi),
                ratio=_ratio(est), ratio_low=_ratio(lo), ratio_high=_ratio(hi))


def _pct(log_value: float) -> float | None:
    ratio = _ratio(log_value)
    return None if ratio is None else math.expm1(log_value) * 100.0


def _show(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _check_inputs(plan: Plan, executions: dict[str, Execution], execution_digests: dict[str, str]) -> None:
    # Records are validated when read; validating again here keeps compare() safe for
    # callers that build the records themselves (a wrong field becomes a one-line error).
    records.validate(plan.to_json(), "plan", where="plan.json")
    for block, execution in executions.items():
        records.validate(execution.to_json(), "execution", where=f"execution/{block}.json")
    unknown = sorted(set(executions) - set(plan.schedule))
    if unknown:
        raise RecordError(f"execution/{unknown[0]}.json", "block is not in the plan's schedule")
    undigested = sorted(set(executions) ^ set(execution_digests))
    if undigested:
        raise RecordError(f"execution/{undigested[0]}.json", "executions and their digests name different blocks")


def _reasons(dec: V.Decision | None, used: int, control_blocks: int, env_changed: list[str],
             excluded: dict[str, int], confidence: float) -> list[str]:
    """Human-readable reasons, most decisive first."""
    out: list[str] = []
    if env_changed:
        out.append(
            f"environment changed mid-run in block(s) {', '.join(env_changed)}: measurements from different "
            "environments are never pooled; fix the node and rerun"
        )
    if excluded:
        parts = ", ".join(f"{n} {why}" for why, n in sorted(excluded.items()))
        out.append(f"excluded blocks (not averaged in): {parts}")
    if dec is None:
        return out
    pct_conf = f"{confidence:.0%}"
    if used < dec.min_blocks:
        out.append(f"too few valid blocks: {used} < {dec.min_blocks}, the fewest for which a {pct_conf} signed-rank interval exists")
        return out
    if control_blocks < dec.min_blocks:
        out.append(
            f"noise floor not measured: {control_blocks} block(s) with A' control runs < {dec.min_blocks}; "
            "a verdict needs the A/A noise floor"
        )
        return out
    est, lo, hi = float(dec.estimate_log[0]), float(dec.low_log[0]), float(dec.high_log[0])
    floor, mde = float(dec.floor_log[0]), float(dec.mde_log[0])
    excludes = lo > 0 or hi < 0
    clears = lo > floor or hi < -floor
    out.append(
        f"{pct_conf} interval of candidate/baseline [{_show(_ratio(lo), '.4f')}, {_show(_ratio(hi), '.4f')}] "
        f"{'excludes' if excludes else 'includes'} 1 (no change); estimate {_show(_pct(est), '+.2f')}%"
    )
    out.append(
        f"the interval {'lies entirely beyond' if clears else 'does not clear'} the A/A noise floor "
        f"of +/-{_show(_pct(floor), '.2f')}% (measured from A' vs A over {control_blocks} blocks)"
    )
    if int(dec.verdict[0]) == V.INCONCLUSIVE and not clears:
        out.append(
            f"noise too high: the minimal detectable effect is {_show(_pct(mde), '.2f')}%, above the "
            f"{_show(_pct(V.MAX_NULL_MDE_LOG), '.2f')}% a no-change result must be able to rule out"
        )
    else:
        out.append(f"minimal detectable effect of this design: {_show(_pct(mde), '.2f')}% at {V.MDE_POWER:.0%} power")
    return out


def _aa_note(verdict: str) -> str:
    """What a deliberate A/A experiment (`--config candidate=baseline`) tells the user."""
    if verdict in ("faster", "slower"):
        return ("deliberate A/A experiment (candidate = baseline) came out "
                f"{verdict}: the setup itself is unstable; do not trust verdicts from it")
    if verdict == "no_detectable_change":
        return ("deliberate A/A experiment (candidate = baseline): the noise floor and minimal detectable "
                "effect above are what this design can resolve on this setup")
    return "deliberate A/A experiment (candidate = baseline): inconclusive, see the reasons above"


def _look(design: Design, executions: dict[str, Execution]) -> int | None:
    """A `stop: early` design: the look whose blocks the executions are (None for the fixed design)."""
    stop = design.stop  # ABSENT (falsy): a fixed design
    if not stop:
        return None
    k = sequential.look_at(len(executions), stop)
    if k is None:
        raise RecordError("execution/", f"{len(executions)} block(s) is no look of the plan's sequential design "
                          f"(looks after {', '.join(str(x.blocks) for x in stop.looks)} blocks)")
    return k


def compare(plan: Plan, executions: dict[str, Execution], execution_digests: dict[str, str], plan_digest: str) -> Comparison:
    """The comparison record (schemas/comparison.schema.json) for one plan's executions."""
    _check_inputs(plan, executions, execution_digests)
    design = plan.design
    confidence = float(design.confidence)
    k = _look(design, executions)
    schedule = sorted(plan.schedule.items())
    if k is not None:  # the blocks the stopping look read; later ones never ran
        schedule = schedule[: int(design.stop.looks[k].blocks)]
    blocks = [block_estimate(bid, runs, executions.get(bid), design, plan_digest) for bid, runs in schedule]
    used = [b for b in blocks if b.used]
    d = np.asarray([b.log_ratio for b in used], dtype=float)
    c = np.asarray([b.control_log_ratio for b in used if b.control_log_ratio is not None], dtype=float)
    env_changed = [b.block for b in blocks if b.execution_status == "environment_changed"]
    excluded: dict[str, int] = {}
    for b in blocks:
        if b.exclusion is not None:
            excluded[b.exclusion] = excluded.get(b.exclusion, 0) + 1
    look = None
    try:
        if k is None:
            dec: V.Decision | None = V.decide(d[None, :], c[None, :], confidence)
            code = int(dec.verdict[0])
        else:
            look = sequential.judge(d, c, design.stop, k)
            dec, code = look.decision, sequential.verdict_code(look)
        failure = None
    except (FloatingPointError, ArithmeticError, ValueError) as exc:
        # A computation that fails proves nothing: inconclusive, never significant.
        dec, code, failure = None, V.INCONCLUSIVE, f"statistics failed ({exc}); no verdict can be drawn"
    if env_changed:
        code = V.INCONCLUSIVE
    level = look.level if look is not None else confidence
    reasons = _reasons(dec, len(used), c.size, env_changed, excluded, level)
    if look is not None:
        reasons.insert(0, _stop_reason(look, design.stop))
    if failure:
        reasons.append(failure)
    warnings = work_warnings(plan, executions)
    reasons[:0] = warnings
    busy = busy_machine_warnings(executions)  # about the floor: after the verdict's own reasons
    reasons += busy
    warnings = warnings + busy
    if plan.arms.candidate.same_as_baseline:  # ABSENT (falsy): not an A/A plan
        reasons.append(_aa_note(V.VERDICTS[code]))
    summary = failure_summary(executions, len(blocks))
    if summary:
        reasons = [summary] + reasons
    fields = _fields(plan, plan_digest, execution_digests, blocks, dec, code, reasons, len(used), c.size, excluded)
    extra: dict = {"failure_summary": summary} if summary else {}
    metric = design.metric
    if look is not None:
        stop = design.stop
        extra["sequential"] = Sequential(
            block_limit=int(stop.block_limit), blocks_run=look.blocks, look=look.index + 1,
            looks_planned=len(stop.looks), level=look.level, why=look.why,
            min_effect_pct=math.expm1(float(stop.min_effect_log)) * 100.0, method=stop.method)
    if metric.shape:
        extra["metric_choice"] = MetricChoice(
            shape=metric.shape.kind, reason=metric.shape.reason, chosen_by=metric.shape.chosen_by,
            selector=job_metrics.chosen_selector(metric) or "")
    used_ex = [executions[b.block] for b in used]
    rows = job_metrics.rows(used_ex, level, job_metrics.chosen_selector(metric))
    if rows:
        extra["job_metrics"] = [JobMetric(**r) for r in rows]
    for hint in (job_metrics.suggestion(fields["verdict"], fields["noise_floor"], rows),
                 job_metrics.bound_warning(metric, used_ex)):
        if hint:
            warnings = warnings + [hint]
            fields["reasons"].append(hint)
    if warnings:
        extra["warnings"] = warnings
    # Why it changed: the same statistics per component, from each used block's run diagnoses.
    per_block = [compare_components.runs_by_arm(executions[b.block]) for b in used]
    explained = compare_components.explain(fields["estimate"], fields["verdict"], len(used), per_block, level,
                                           no_rows=_no_components_reason(plan, used_ex))
    return Comparison(**fields, **explained, **extra)


def _stop_reason(look: sequential.Look, stop: Stop) -> str:
    what = {"clears_floor": "the interval cleared the A/A floor",
            "rules_out_min_effect": f"the interval ruled out a change above "
                                    f"{math.expm1(float(stop.min_effect_log)) * 100:.3g}%",
            "block_limit": "the block limit was reached", "continue": "the design had not stopped"}[look.why]
    return (f"sequential design (stop: early): {what} at look {look.index + 1} of {len(stop.looks)}, after "
            f"{look.blocks} of at most {stop.block_limit} blocks; this look's interval is at {look.level:.2%} so "
            f"that the error over every look stays within {1 - sum(x.alpha for x in stop.looks):.0%} confidence")


def _no_components_reason(plan: Plan, used: list[Execution]) -> str:
    """Why no run has components, said as it is (not a guess between two causes)."""
    if not plan.design.record_runs:
        return "trials.record_runs is off"
    ok = [r for ex in used for r in ex.runs if r.status == "ok" and r.arm != "warmup"]
    if ok and all(not r.capture for r in ok):  # execution version 3: null when not recorded
        if plan.design.metric.step_pattern or plan.design.metric.source in ("stdout_steps", "process_wall"):
            return ("the program was recorded from outside (stallcase record): its runs hold no recorder, so no run "
                    "has a diagnosis to take components from")
        return "no run took a snapshot: the program's own loop does not use the FlightRecorder"
    errors = [r.capture.error for r in ok if r.capture and r.capture.error]
    if errors:
        return f"no run's diagnosis gave components ({errors[0]})"
    return "no run was diagnosed"


def failure_summary(executions: dict[str, Execution], planned: int) -> str | None:
    """'6 of 6 blocks failed: exit status 1: rank 0 exited: ValueError: ...': how many blocks
    had a failed run (its last attempt) and the most common reason, so the end of a run says why."""
    failed_blocks, reasons = 0, {}
    for execution in executions.values():
        final = {}
        for run in execution.runs:
            final[run.index] = run
        errors = [r.error or "failed" for r in final.values() if r.status == "failed"]
        if errors:
            failed_blocks += 1
            for e in errors:
                reasons[e] = reasons.get(e, 0) + 1
    if not failed_blocks:
        return None
    top = max(sorted(reasons), key=reasons.get)
    return f"{failed_blocks} of {planned} blocks had failed runs: {top}"


# Arms whose declared work per step differs by more than this do different work per step.
WORK_TOLERANCE = 0.01


def work_warnings(plan: Plan, executions: dict[str, Execution]) -> list[str]:
    """What the comparison must say when the arms do different work per step: the recorded
    work (median per counted step) differs, or the argv differ in a flag that sets it.

    A time-per-step verdict on arms that do different work per step is a true statement about
    step time, not a speedup: it carries the warning (and the `per:` that compares per unit); a
    comparison per item or token says what it compared."""
    per = plan.design.metric.per or "step"
    out = []
    recorded = work_difference(plan.design, executions)
    if recorded:
        out.append(recorded)
    flags = work_mod.changed_flags(list(plan.arms.baseline.argv), list(plan.arms.candidate.argv))
    if flags:
        what = f"the arms' argv differ in a flag that sets the work per step ({'; '.join(flags)})"
        if per == "step":
            out.append(f"{what}: this per-step verdict compares steps of different work; set trials.metric.per: token "
                       "(or item) with the work recorded (a (?P<tokens>...) group, rec.step(i, tokens=...), or "
                       "trials.metric.tokens_per_step: \"--batch_size * --bptt\")")
        else:
            out.append(f"{what}: compared per {per}, as trials.metric.per says")
    return out


def busy_machine_warnings(executions: dict[str, Execution]) -> list[str]:
    """What the comparison must say when other processes loaded the machine during its runs
    (trials/host_load.py notes each such run): the floor then holds their noise too."""
    timed = [run for ex in executions.values() for run in ex.runs if run.arm != "warmup" and run.status == "ok"]
    busy = [u for run in timed for u in run.unusual if u.startswith(BUSY_NOTE)]
    if not busy:
        return []
    shares = [int(m.group(1)) for m in map(_BUSY_SHARE.search, busy) if m]
    most = f" (up to {max(shares)}% of its CPUs)" if shares else ""
    return [f"the machine was busy during {len(busy)} of {len(timed)} runs: other processes used at least "
            f"{BUSY_SHARE:.0%} of its CPUs{most}; the noise floor holds their noise too: run the trials "
            "on a quiet machine (or with its other work stopped) for the floor of the program alone"]


_BUSY_SHARE = re.compile(r"used (\d+)% of")


def work_difference(design: Design, executions: dict[str, Execution]) -> str | None:
    """The reason when baseline and candidate runs recorded different work per step, else None.
    Runs without recorded work (older records, workloads that declare none) say nothing."""
    per = design.metric.per or "step"
    work: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for execution in executions.values():
        for run in execution.runs:
            if run.status != "ok" or run.arm == "warmup" or not run.work:
                continue
            side = work["B" if run.arm == "B" else "A"]
            for key, value in (("items_per_step", run.work.items_per_step), ("tokens_per_step", run.work.tokens_per_step)):
                if value is not None:
                    side.setdefault(key, []).append(float(value))
    for key in ("items_per_step", "tokens_per_step"):
        a, b = work["A"].get(key), work["B"].get(key)
        if not a or not b:
            continue
        ma, mb = float(np.median(a)), float(np.median(b))
        if abs(mb - ma) <= WORK_TOLERANCE * max(ma, mb):
            continue
        unit = key.removesuffix("_per_step")
        what = f"the arms do different work per step: baseline {ma:g} {unit}/step, candidate {mb:g} {unit}/step"
        if per == "step":
            return (f"{what}: this per-step verdict compares steps of different work, not a speedup; set "
                    f"trials.metric.per: {unit[:-1]} to compare time per {unit[:-1]}")
        return f"{what}; compared per {per}, as trials.metric.per says"
    return None


_SCALARS = ("estimate_log", "low_log", "high_log", "floor_log",
            "control_estimate_log", "control_low_log", "control_high_log", "mde_log")


def _scalars(dec: V.Decision | None) -> dict[str, float]:
    """The one experiment's numbers; NaN (written as null) when nothing was computed."""
    if dec is None:
        return dict.fromkeys(_SCALARS, math.nan)
    return {name: float(getattr(dec, name)[0]) for name in _SCALARS}


def _fields(plan, plan_digest, execution_digests, blocks, dec, code, reasons, used, control_blocks, excluded) -> dict:
    """Comparison's fields but the explanation (compare_components.explain adds those)."""
    design, x = plan.design, _scalars(dec)
    return dict(
        incident_id=plan.incident_id,
        experiment=plan.experiment,
        plan_digest=plan_digest,
        execution_digests=dict(sorted(execution_digests.items())),
        aa_experiment=bool(plan.arms.candidate.same_as_baseline),
        metric=Metric(**{k: getattr(design.metric, k) for k in ("name", "source", "statistic", "unit")},
                      per=design.metric.per or "step", label=_metric_label(design.metric)),
        design=DesignSummary(**{k: getattr(design, k) for k in _DESIGN_KEYS}),
        method=Method(
            schedule="counterbalanced_mirrored_rounds",
            per_block="log_ratio_of_medians",
            interval="hodges_lehmann_signed_rank",
            min_valid_blocks=stats.min_blocks(float(design.confidence)),
            mde_power=V.MDE_POWER,
            max_null_mde_log=V.MAX_NULL_MDE_LOG,
        ),
        counts=Counts(
            planned_blocks=len(blocks),
            valid_blocks=used,
            control_blocks=control_blocks,
            excluded_blocks=len(blocks) - used,
            excluded_by_reason=dict(sorted(excluded.items())),
            unusual_runs=sum(b.unusual_runs for b in blocks),
        ),
        estimate=Estimate(**_interval(x["estimate_log"], x["low_log"], x["high_log"]), change_pct=_pct(x["estimate_log"])),
        noise_floor=NoiseFloor(
            log=_num(x["floor_log"]),
            pct=_pct(x["floor_log"]),
            control=Interval(**_interval(x["control_estimate_log"], x["control_low_log"], x["control_high_log"])),
        ),
        mde=Mde(log=_num(x["mde_log"]), pct=_pct(x["mde_log"]), power=V.MDE_POWER),
        verdict=V.VERDICTS[code],
        reasons=reasons,
        blocks=[b.to_record() for b in blocks],
    )


def _metric_label(metric: PlanMetric) -> str:
    """What the end line calls the metric: never a unit it does not have."""
    per = metric.per or "step"
    base = metric.name.replace("_", " ") if per == "step" else f"time per {per}"
    if metric.job == "throughput":
        who = f"{metric.role} " if metric.role else "job "
        return f"{who}throughput ({'time per ' + per})"
    if metric.job == "wall":
        return "job wall time"
    return base + (" less waits for a CPU" if metric.cpu_wait == "removed" else "")


_DESIGN_KEYS = ("blocks", "runs_per_arm", "control_runs", "warmup_runs", "seed", "max_retries", "max_failed_fraction", "confidence")
