"""Trial runner: one block of interleaved baseline (A), candidate (B) and control (A') runs.

Each run is a fresh process started from the arm's rebuilt work directory with an argv
list (never a shell) and only the plan's allow-listed environment plus what the node
must provide; runs go through a `Runner` (runner.py: local, SLURM node-local, fake), which
owns the retry and timeout policy. The recorder inside each process of the workload writes
its per-step times into STALLCASE_STEPS_OUT_DIR (one file per process: ranks and roles);
what a run's value is, and every other way to read it, is in metric.py and job_metric.py.
A failed run keeps its last stderr lines and says why (the rank and exception when the
output names them). A failed run is retried up to `max_retries` and recorded as failed (never
dropped); a run whose metric cannot be read is not retried (the same program reads the
same nothing), nor one whose last two attempts failed alike (same exit status and error line). A block whose arm fails its first run, with no run of that arm ever
succeeding, stops there: a program that cannot start or report is not run dozens of
times. A block with more than `max_failed_fraction` of its runs failed is marked
`too_many_failures`, and one whose environment changed mid-block is marked
`environment_changed`: compare excludes both and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

from ..core import atomic, environment, records, typed
from ..plan import metric as metric_mod
from ..plan.rebuild import NODE_ENV, materialize_arm, trial_env  # noqa: F401  (NODE_ENV: read by callers)
from ..plan.types import Design, Plan
from .runner import METRIC_UNREADABLE, STATISTICS, LocalRunner, RetryPolicy, Runner, RunRequest  # noqa: F401
from .types import Execution, Run


def one_run(spec: dict, design: Design, entry: dict, attempt: int, log, capture_dir: Path | None = None,
            fingerprint: dict | None = None) -> Run:
    """One fresh process of one arm (LocalRunner), as the execution record's run. With
    `capture_dir` the workload's recorder is on and its snapshots land there (never in the
    original incident); the run then carries its own diagnosis."""
    req = RunRequest(spec, design, entry, attempt, fingerprint or {}, capture_dir)
    return LocalRunner().run(req, log)


class _Log:
    """The block's log: its writes name the log when the disk is full (write() says no file)."""

    def __init__(self, path):
        self.path = Path(path)
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, text: str) -> None:
        with atomic.naming(self.path):
            self._fh.write(text)
            self._fh.flush()

    def close(self) -> None:
        with atomic.naming(self.path):
            self._fh.close()


def _open_log(log_path):
    try:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        return _Log(log_path)
    except OSError as exc:
        from ..core.errors import StallcaseError

        raise StallcaseError(log_path, f"cannot open the block's log: {exc.strerror or exc}") from None


def run_block(plan: Plan, plan_digest: str, preflight_record: dict, preflight_digest: str, block: str,
              store_root, work_root, *, log_path=None, progress=None, runner: Runner | None = None) -> Execution:
    """Run one block's schedule through `runner` (default: runner.runner_for this node);
    returns the execution record."""
    from .runner import runner_for

    runner = runner or runner_for()
    design = plan.design
    policy = RetryPolicy.of(design)
    work_root = Path(work_root)
    specs = {arm: materialize_arm(plan, arm, store_root, work_root / arm) for arm in ("A", "B")}
    # Captures of an earlier, killed attempt at this block: its record was never written, so
    # nothing reads them (a block that finished is not run again unless forced, which replaces them).
    shutil.rmtree(work_root / "captures", ignore_errors=True)
    env_before = environment.fingerprint(with_nvcc=False)
    runs, notes = [], []
    started = time.time_ns()
    log = _open_log(log_path) if log_path else None
    stopped = block_source = None
    try:
        schedule = plan.schedule[block]
        ever_ok: set[str] = set()  # arms ("A" for A, A' and warm-up; "B") with a successful run
        for n, entry in enumerate(schedule):
            family = "B" if "B" in (entry["arm"], entry.get("warms")) else "A"  # warm-ups warm their own arm
            spec = specs[family]
            attempts = []
            for attempt in policy.attempts():
                cap = work_root / "captures" / f"{entry['index']:03d}-{attempt}" if design.record_runs else None
                run = runner.run(RunRequest(spec, design, entry, attempt, env_before, cap), log)
                if run.status == "ok" and block_source not in (None, run.metric_source):
                    run = run.failed(f"metric source {run.metric_source} differs from this block's "
                                     f"{block_source}: runs measured differently are never compared")
                attempts.append(run)
                runs.append(run)
                if run.status == "ok":
                    block_source = block_source or run.metric_source
                    ever_ok.add(family)
                    break
                if not policy.retry(run, attempts):
                    break
            if progress:
                progress(f"{block}: run {n + 1}/{len(schedule)} ({entry['arm']}) {run.status}")
            if run.status == "failed" and family not in ever_ok:
                left = len(schedule) - n - 1
                stopped = (f"stopped after run {entry['index']} ({entry['arm']}): the {'candidate' if family == 'B' else 'baseline'} "
                           f"arm has not run successfully once ({run.error}); the {left} remaining run(s) were not started")
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
        final[r.index] = r
    counted = [r for r in final.values() if r.arm != "warmup"]
    failed = sum(r.status == "failed" for r in counted)
    if stopped and status == "complete":
        status = "too_many_failures"
        notes.append(stopped)
    elif counted and failed / len(counted) > design.max_failed_fraction and status == "complete":
        status = "too_many_failures"
        notes.append(f"{failed} of {len(counted)} runs failed after retries (limit {design.max_failed_fraction:.0%})")
    if block_source is not None:
        notes.append(f"metric: {metric_mod.describe(dict(design.metric.to_json(), source=block_source))}")
    return Execution(block=block, plan_digest=plan_digest, preflight_digest=preflight_digest, node=socket.gethostname(),
                     started_unix_ns=started, ended_unix_ns=time.time_ns(), status=status, runs=runs, notes=notes)
