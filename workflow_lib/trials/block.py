"""Trial runner: one block of interleaved baseline (A), candidate (B) and control (A') runs.

Each run is a fresh process started from the arm's rebuilt work directory with an argv
list (never a shell) and only the plan's allow-listed environment plus what the node
must provide. The recorder inside the workload writes its per-step times to the file
named by STALLCASE_STEPS_OUT; what a run's value is, and every other way to read it, is
in metric.py. A failed run is retried up to `max_retries` and recorded as failed (never
dropped); a run whose metric cannot be read is not retried (the same program reads the
same nothing). A block whose arm fails its first run, with no run of that arm ever
succeeding, stops there: a program that cannot start or report is not run dozens of
times. A block with more than `max_failed_fraction` of its runs failed is marked
`too_many_failures`, and one whose environment changed mid-block is marked
`environment_changed`: compare excludes both and says so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from statistics import mean, median

from ..core import environment, records
from ..plan import metric as metric_mod
from ..plan.build import NODE_ENV, materialize_arm, trial_env  # noqa: F401  (NODE_ENV: read by callers)

EXECUTION_VERSION = 2

STATISTICS = {"median": median, "mean": mean, "min": min}
METRIC_UNREADABLE = "metric unreadable"


class GpuWatch:
    """Samples SM clock, temperature and clock-event reasons in the runner during one run."""

    INTERVAL_S = 0.1

    def __init__(self):
        self.samples: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self.reason: str | None = None
        try:
            self.nvml = environment.import_pynvml()
            self.nvml.nvmlInit()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            index = int(visible.split(",")[0]) if visible and visible.split(",")[0].isdigit() else 0
            self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:  # NVML missing or no device: say so, never guess
            self.nvml = None
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"
        self._thread = threading.Thread(target=self._loop, daemon=True, name="stallcase-gpuwatch")

    def _loop(self) -> None:
        n = self.nvml
        getter = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        while not self._stop.is_set():
            try:
                self.samples.append((n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM),
                                     n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU),
                                     int(getter(self.handle))))
            except Exception as exc:  # a failing read ends sampling for this run; recorded below
                self.reason = f"NVML read failed: {exc}"
                return
            self._stop.wait(self.INTERVAL_S)

    def __enter__(self):
        if self.nvml is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)

    def summary(self) -> dict:
        if not self.samples:
            return {"status": "not_observed", "reason": self.reason or "no NVML sample during the run"}
        clocks = [s[0] for s in self.samples]
        reasons = 0
        for s in self.samples:
            reasons |= s[2]
        return {"status": "observed", "reason": None, "samples": len(self.samples),
                "sm_clock_mhz_min": min(clocks), "sm_clock_mhz_max": max(clocks),
                "temp_c_max": max(s[1] for s in self.samples), "clock_event_reasons_or": reasons}


def run_env(plan_env: dict, extra: dict) -> dict:
    return trial_env(plan_env, extra)  # the node's own NODE_ENV names are never taken from the plan


def read_metric(design_metric: dict, steps_file: Path, stdout: str, wall_ns: int = 0) -> tuple[list[float], list[str]]:
    """The run's values and unusual events (see metric.read; kept for callers of the old name)."""
    got = metric_mod.read(design_metric, steps_file, stdout, wall_ns)
    return got["values_ns"], got["unusual"]


def _spans_of(incident_dir: Path):
    """The run's spans table, or None when its incident has none (the components say so)."""
    from ..core.incident import read_incident

    inc = read_incident(incident_dir)
    return inc.table("spans") if inc.observed("host") else None


def _diagnose_capture(capture_dir: Path, skip_steps: int = 0) -> dict | None:
    """The run's own incident (if the workload snapshotted) and its diagnosis, written beside it,
    with the per-step components the comparison explains the change with (components.py)."""
    from .components import run_components
    from ..diagnose import diagnose_dir
    from ..core.errors import StallcaseError

    found = sorted(p.parent for p in capture_dir.glob("*/manifest.json"))
    if not found:
        return None
    inc = found[-1]
    try:
        d = diagnose_dir(inc, out_path=inc / "diagnosis.json")
    except StallcaseError as exc:
        return {"incident": str(inc), "diagnosis": None, "error": exc.oneline()}
    s = d["summary"]
    return {"incident": str(inc), "diagnosis": str(inc / "diagnosis.json"), "error": None,
            "explained_ns": int(s["explained_ns"]), "unexplained_ns": int(s["unexplained_ns"]),
            "components": run_components(d, skip_steps, _spans_of(inc))}


def one_run(spec: dict, design: dict, entry: dict, attempt: int, log, capture_dir: Path | None = None) -> dict:
    """One fresh process of one arm. With `capture_dir` the workload's recorder is on and its
    snapshots land there (never in the original incident); the run then carries its own diagnosis."""
    metric = design["metric"]
    with tempfile.TemporaryDirectory(prefix="stallcase-run-") as tmp:
        steps_file = Path(tmp) / "steps.json"
        extra = {"STALLCASE_STEPS_OUT": str(steps_file), "STALLCASE_TRIAL_ARM": entry["arm"],
                 "STALLCASE_RECORDER": "off"}
        if capture_dir is not None:
            capture_dir.mkdir(parents=True, exist_ok=True)
            # Absolute: the run's cwd is the program's (its rebuilt tree, or the recorded cwd),
            # not Snakemake's, so a relative results_dir would put the capture elsewhere and
            # the diagnosis below would not find it.
            extra.update(STALLCASE_RECORDER="on", STALLCASE_INCIDENTS_DIR=str(capture_dir.resolve()))
        env = run_env(spec["env"], extra)
        start = time.time_ns()
        err = None
        code = None
        stdout = stderr = ""
        with GpuWatch() as watch:
            try:
                proc = subprocess.run(spec["argv"], cwd=spec["cwd"], env=env, capture_output=True, text=True,
                                      timeout=design.get("run_timeout_s", 600), check=False)
                code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
                if log:
                    log.write(f"--- run {entry['index']} arm {entry['arm']} attempt {attempt} exit {code}\n{proc.stderr[-4000:]}")
            except subprocess.TimeoutExpired:
                err = f"timed out after {design.get('run_timeout_s', 600)} s"
            except OSError as exc:
                err = f"could not start: {exc}"
        end = time.time_ns()
        values, unusual, source, work = [], [], None, None
        if err is None and code != 0:
            err = f"exit status {code}"
        if err is None:
            try:
                got = metric_mod.read(metric, steps_file, stdout + "\n" + stderr, end - start)
                values, unusual, source, work = got["values_ns"], got["unusual"], got["source"], got["work"]
            except metric_mod.MetricUnreadable as exc:
                err = f"{METRIC_UNREADABLE}: {exc}"
    ok = err is None
    run = {"index": entry["index"], "arm": entry["arm"], "attempt": attempt, "status": "ok" if ok else "failed",
           "exit_code": code, "start_unix_ns": start, "end_unix_ns": end,
           "metric_ns": STATISTICS[metric["statistic"]](values) if ok else None,
           "values_ns": values if ok else [], "gpu": watch.summary(), "unusual": unusual, "error": err,
           "metric_source": source, "work": work}
    if capture_dir is not None:
        run["capture"] = _diagnose_capture(capture_dir, int(metric.get("skip_steps", 0)))
    return run


def _open_log(log_path):
    try:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        return open(log_path, "a", encoding="utf-8")
    except OSError as exc:
        from ..core.errors import StallcaseError

        raise StallcaseError(log_path, f"cannot open the block's log: {exc.strerror or exc}") from None


def run_block(plan: dict, plan_digest: str, preflight_record: dict, preflight_digest: str, block: str,
              store_root, work_root, *, log_path=None, progress=None) -> dict:
    """Run one block's schedule; returns the execution record."""
    design = plan["design"]
    work_root = Path(work_root)
    specs = {arm: materialize_arm(plan, arm, store_root, work_root / arm) for arm in ("A", "B")}
    env_before = environment.fingerprint(with_nvcc=False)
    runs, notes = [], []
    started = time.time_ns()
    log = _open_log(log_path) if log_path else None
    stopped = block_source = None
    try:
        schedule = plan["schedule"][block]
        ever_ok: set[str] = set()  # arms ("A" for A, A' and warm-up; "B") with a successful run
        for n, entry in enumerate(schedule):
            family = "B" if "B" in (entry["arm"], entry.get("warms")) else "A"  # warm-ups warm their own arm
            spec = specs[family]
            for attempt in range(design["max_retries"] + 1):
                cap = work_root / "captures" / f"{entry['index']:03d}-{attempt}" if design.get("record_runs") else None
                run = one_run(spec, design, entry, attempt, log, cap)
                if run["status"] == "ok" and block_source not in (None, run["metric_source"]):
                    run.update(status="failed", metric_ns=None, values_ns=[],
                               error=f"metric source {run['metric_source']} differs from this block's "
                                     f"{block_source}: runs measured differently are never compared")
                runs.append(run)
                if run["status"] == "ok":
                    block_source = block_source or run["metric_source"]
                    ever_ok.add(family)
                    break
                if (run["error"] or "").startswith(METRIC_UNREADABLE):
                    break  # the same program reads the same nothing
            if progress:
                progress(f"{block}: run {n + 1}/{len(schedule)} ({entry['arm']}) {run['status']}")
            if run["status"] == "failed" and family not in ever_ok:
                left = len(schedule) - n - 1
                stopped = (f"stopped after run {entry['index']} ({entry['arm']}): the {'candidate' if family == 'B' else 'baseline'} "
                           f"arm has not run successfully once ({run['error']}); the {left} remaining run(s) were not started")
                break
    finally:
        if log:
            log.close()
    env_after = environment.fingerprint(with_nvcc=False)
    status = "complete"
    changed = environment.compare(env_before, env_after)
    if changed:
        status = "environment_changed"
        notes += [f"{d['field']} changed during the block: {d['planned']!r} -> {d['observed']!r}" for d in changed]
    final = {}
    for r in runs:  # last attempt of each scheduled run decides
        final[r["index"]] = r
    counted = [r for r in final.values() if r["arm"] != "warmup"]
    failed = sum(r["status"] == "failed" for r in counted)
    if stopped and status == "complete":
        status = "too_many_failures"
        notes.append(stopped)
    elif counted and failed / len(counted) > design["max_failed_fraction"] and status == "complete":
        status = "too_many_failures"
        notes.append(f"{failed} of {len(counted)} runs failed after retries (limit {design['max_failed_fraction']:.0%})")
    if block_source is not None:
        notes.append(f"metric: {metric_mod.describe(dict(design['metric'], source=block_source))}")
    return {"schema_version": EXECUTION_VERSION, "kind": "execution", "block": block, "plan_digest": plan_digest,
            "preflight_digest": preflight_digest, "node": socket.gethostname(), "started_unix_ns": started,
            "ended_unix_ns": time.time_ns(), "status": status, "runs": runs, "notes": notes}


def run_block_rule(plan_path, preflight_path, block: str, store_root, work_root, out_path, *, log_path=None) -> dict:
    """Rule entry: read and check inputs, run the block, write execution/<block>.json."""
    plan = records.read_record(plan_path, "plan")
    pre = records.read_record(preflight_path, "preflight")
    plan_digest = records.digest_of(plan)
    if pre["plan_digest"] != plan_digest:
        from ..core.errors import RecordError

        raise RecordError(preflight_path, f"preflight checked plan {pre['plan_digest']}, not this plan {plan_digest}")
    record = run_block(plan, plan_digest, pre, records.digest_of(pre), block, store_root, work_root, log_path=log_path)
    records.write_record(out_path, record, "execution")
    return record
