"""The executor seam: how one trial run is run, behind one small interface.

    result = runner.run(RunRequest(spec, design, entry, attempt, fingerprint, capture_dir), log)

A `Runner` starts one run of one arm and returns a `Run` (types.py: the execution record's
run, typed and frozen). `LocalRunner` starts a fresh process on this node; on a SLURM cluster
Snakemake's SLURM executor already puts each block's job on a node, and what runs inside
that job is the node-local runner (`SlurmRunner` is it, named for where it runs: it
refuses to start outside an allocation). `FakeRunner` starts nothing and returns the same
type, for tests of the block logic (hyperfine's `Executor`/`MockExecutor` is the model).

The fingerprint passed in is the environment the block checked before its first run
(environment.fingerprint); the runner never computes its own. Retry and timeout policy
live in `RetryPolicy`, read once from the plan's design.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, median
from typing import Callable, Protocol

from ..plan import metric as metric_mod
from ..plan.types import Design
from . import host_load, line_clock, observe
from .types import Rank, Run, Work
from ..core.errors import StallcaseError

STATISTICS = {"median": median, "mean": mean, "min": min}
METRIC_UNREADABLE = "metric unreadable"
STDERR_TAIL_LINES = 20
DEFAULT_TIMEOUT_S = 600


@dataclass(frozen=True)
class RetryPolicy:
    """When a run is tried again, and how long one may take (the plan's design)."""

    max_retries: int
    """attempts after the first, for a run that failed for a reason that may pass"""
    run_timeout_s: float
    """a run still going after this is killed and counts as failed"""

    @classmethod
    def of(cls, design: Design) -> "RetryPolicy":
        return cls(int(design.max_retries), float(design.run_timeout_s or DEFAULT_TIMEOUT_S))  # ABSENT: the default

    def attempts(self) -> range:
        return range(self.max_retries + 1)

    def retry(self, result: "Run", attempts: list["Run"] | None = None) -> bool:
        """Try again? Not after success, not when the metric could not be read (the same
        program reads the same nothing), and not when the last two attempts failed alike (the
        same exit status and error line: a deterministic failure, which retries only repeat)."""
        if result.status == "ok" or (result.error or "").startswith(METRIC_UNREADABLE):
            return False
        tried = attempts or [result]
        if len(tried) >= 2 and all(r.status == "failed" for r in tried[-2:]):
            a, b = tried[-2], tried[-1]
            if (a.exit_code, a.error) == (b.exit_code, b.error) and a.exit_code is not None:
                return False
        return True


@dataclass(frozen=True)
class RunRequest:
    spec: dict
    """the arm's rebuilt {argv, cwd, env} (plan/rebuild.py materialize_arm)"""
    design: Design
    """the plan's design (metric, timeouts)"""
    entry: dict
    """the schedule entry: index, arm (and `warms`)"""
    attempt: int
    fingerprint: dict
    """the block's environment fingerprint, checked before its first run"""
    capture_dir: Path | None = None
    """with it the workload's recorder is on and snapshots land there"""


class Runner(Protocol):
    def run(self, req: RunRequest, log=None) -> Run: ...


# ---- why a run failed -------------------------------------------------------------------
_RANK_PREFIX = re.compile(r"^\[(?:default)?rank(\d+)\]:\s*(.*)$")
_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|[A-Z]\w*Error)\b:?(.*)$")
_TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")


def failure_reason(code: int | None, stderr: str) -> str:
    """'exit status 1: rank 0: ValueError: ...' from a failed run's stderr (the last exception line,
    and the rank that printed it when torchrun's `[rankN]:` prefix or failure summary says)."""
    rank, exc = None, None
    for line in stderr.splitlines():
        m = _RANK_PREFIX.match(line.strip())
        r, text = (m.group(1), m.group(2)) if m else (None, line.strip())
        if _EXC.match(text):
            exc, rank = text[:300], r if r is not None else rank
        t = _TORCHRUN_RANK.match(line)
        if t and rank is None:
            rank = t.group(1)
    head = f"exit status {code}"
    if exc is None:
        return head
    return f"{head}: rank {rank} exited: {exc}" if rank is not None else f"{head}: {exc}"


def _tail(text: str) -> list[str]:
    return [ln[:500] for ln in text.splitlines()[-STDERR_TAIL_LINES:]]


# ---- one run: a process group ---------------------------------------------------------------
_LIVE_GROUPS: set[int] = set()
"""Process groups of runs in progress: killed if this process exits while one runs (a rule run
in a thread cannot install a signal handler, so the interpreter's exit is the last chance)."""


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


atexit.register(lambda: [_kill_group(g) for g in list(_LIVE_GROUPS)])


@contextlib.contextmanager
def _sigterm_interrupts():
    """In the main thread, SIGTERM (Snakemake stopping a job's process) raises KeyboardInterrupt,
    so the run's group is killed on the way out instead of outliving this process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_group(argv: list[str], cwd: str, env: dict, timeout_s: float, tmp: Path,
              clocks: dict | None = None) -> tuple[int | None, str, str]:
    """Run argv (never a shell) as the leader of a new session and process group; returns
    (exit code or None on timeout, stdout, stderr). When the leader ends, times out, or this
    process is interrupted, the whole group is killed with SIGKILL: a worker that ignores SIGTERM
    or outlives its parent must not load the machine while the next run is timed. Output goes
    to files, not pipes: a child that keeps the pipes open would hold a pipe reader until the
    timeout even after the leader exited. With `clocks` (a dict) the output goes through pipes
    instead, each line noted with its arrival and the run's wait for a CPU (line_clock.py) into clocks["stdout"]
    and clocks["stderr"]; the group is killed when the leader ends, so the pipes close then."""
    out_path, err_path = tmp / "run.stdout", tmp / "run.stderr"
    readers = {}
    if clocks is None:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
    else:
        # A line is noted when it arrives, so it must arrive when printed: Python block-buffers
        # a pipe (PyTorch's word_language_model prints its ms/batch lines without flush: they
        # came in bursts, two lines 0.6 ms apart, and the run's wait could not be placed), so
        # the run's Python writes through. Both arms run with it; a line is one write more.
        env = {**env, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        readers = {"stdout": line_clock.LineClock(proc.stdout, out_path, proc.pid),
                   "stderr": line_clock.LineClock(proc.stderr, err_path, proc.pid)}
    _LIVE_GROUPS.add(proc.pid)
    code = None
    try:
        with _sigterm_interrupts():
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = None
    finally:
        _kill_group(proc.pid)  # the group outlives its leader while any member is left
        _LIVE_GROUPS.discard(proc.pid)
        proc.wait()
        for name, reader in readers.items():  # a daemon outside the group may hold a pipe: do not wait on it
            clocks[name] = reader.join(timeout=5)
    return code, _read_text(out_path), _read_text(err_path)


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


# ---- the runners ----------------------------------------------------------------------------
class LocalRunner:
    """A fresh process on this node, its argv list (never a shell), the plan's environment."""

    def __init__(self, watch=None, diagnose=None):
        self._watch = watch or observe.GpuWatch
        self._diagnose = diagnose or observe.diagnose_capture

    def run(self, req: RunRequest, log=None) -> Run:
        design, entry, policy = req.design, req.entry, RetryPolicy.of(req.design)
        metric = design.metric
        with tempfile.TemporaryDirectory(prefix="stallcase-run-") as tmp:
            steps_file, steps_dir = Path(tmp) / "steps.json", Path(tmp) / "steps"
            steps_dir.mkdir()
            extra = {"STALLCASE_STEPS_OUT": str(steps_file), "STALLCASE_STEPS_OUT_DIR": str(steps_dir),
                     "STALLCASE_TRIAL_ARM": entry["arm"], "STALLCASE_RECORDER": "off"}
            if req.capture_dir is not None:
                req.capture_dir.mkdir(parents=True, exist_ok=True)
                # Absolute: the run's cwd is the program's, not Snakemake's (see trials.py).
                extra.update(STALLCASE_RECORDER="on", STALLCASE_INCIDENTS_DIR=str(req.capture_dir.resolve()))
            env = observe.run_env(req.spec["env"], extra)
            start, err, code, stdout, stderr = time.time_ns(), None, None, "", ""
            load_before = host_load.sample()
            with self._watch() as watch:
                try:
                    clocks = {} if metric.cpu_wait == "removed" else None
                    code, stdout, stderr = run_group(req.spec["argv"], req.spec["cwd"], env, policy.run_timeout_s, Path(tmp),
                                                     clocks)
                    if log:
                        log.write(f"--- run {entry['index']} arm {entry['arm']} attempt {req.attempt} exit {code}\n{stderr[-4000:]}")
                    if code is None:
                        err = f"timed out after {policy.run_timeout_s:g} s"
                except OSError as exc:
                    err = f"could not start: {exc}"
            end = time.time_ns()
            busy = host_load.note(host_load.other_share(load_before, host_load.sample()))
            got = {"values_ns": [], "unusual": [], "source": None, "work": None}
            if err is None and code != 0:
                err = failure_reason(code, stderr)
            if err is None:
                try:
                    got = metric_mod.read(metric.to_json(), steps_file, stdout + "\n" + stderr, end - start, steps_dir,
                                          entry=entry, streams=None if clocks is None else
                                          [(stdout, clocks.get("stdout", [])), (stderr, clocks.get("stderr", []))])
                except metric_mod.MetricUnreadable as exc:
                    err = f"{METRIC_UNREADABLE}: {exc}"
        ok = err is None
        values = got["values_ns"] if ok else []
        result = Run(
            index=entry["index"], arm=entry["arm"], attempt=req.attempt, status="ok" if ok else "failed",
            exit_code=code, start_unix_ns=start, end_unix_ns=end,
            metric_ns=STATISTICS[metric.statistic](values) if ok else None, values_ns=values,
            gpu=watch.summary(), unusual=got["unusual"] + ([busy] if busy else []), error=err, metric_source=got["source"],
            work=None if got["work"] is None else Work.from_json(got["work"]), stderr_tail=[] if ok else _tail(stderr),
            ranks=None if got.get("ranks") is None else [Rank.from_json(r) for r in got["ranks"]], capture=None,
            alternates=got.get("alternates") if ok else None)
        if req.capture_dir is not None:
            result = dataclasses.replace(result, capture=self._diagnose(req.capture_dir, int(metric.skip_steps or 0)))
        return result


class SlurmRunner(LocalRunner):
    """The node-local runner inside a SLURM job (Snakemake's SLURM executor placed the block)."""

    def run(self, req: RunRequest, log=None) -> Run:
        if not os.environ.get("SLURM_JOB_ID"):
            raise StallcaseError("profiles/slurm", "SlurmRunner outside a SLURM allocation (no SLURM_JOB_ID)")
        return super().run(req, log)


class FakeRunner:
    """Starts nothing: `decide(request) -> (values_ns, error)` says what the run measured."""

    def __init__(self, decide: Callable[[RunRequest], tuple[list[float], str | None]], source: str = "recorder_steps"):
        self.decide = decide
        self.source = source
        self.requests: list[RunRequest] = []

    def run(self, req: RunRequest, log=None) -> Run:
        self.requests.append(req)
        values, error = self.decide(req)
        start = time.time_ns()
        ok = error is None
        return Run(
            index=req.entry["index"], arm=req.entry["arm"], attempt=req.attempt, status="ok" if ok else "failed",
            exit_code=0 if ok else 1, start_unix_ns=start, end_unix_ns=start + 1,
            metric_ns=STATISTICS[req.design.metric.statistic](values) if ok else None,
            values_ns=list(values) if ok else [], gpu={"status": "not_observed", "reason": "fake runner"},
            unusual=[], error=error, metric_source=self.source if ok else None, work=None,
            stderr_tail=[] if ok else [error], ranks=None, capture=None, alternates=None)


def runner_for(executor: str | None = None) -> Runner:
    """The runner for where the block runs: `slurm` inside a SLURM job, else local."""
    return SlurmRunner() if (executor or ("slurm" if os.environ.get("SLURM_JOB_ID") else "local")) == "slurm" else LocalRunner()
