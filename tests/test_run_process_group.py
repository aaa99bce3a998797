"""A trial run is a process group: timeout, failure and interruption leave no process of it.

The workload forks a child that ignores SIGTERM and sleeps (a DataLoader worker or a torchrun
rank that outlives its parent would do the same); the child's pid is written to a file, and
after the run no process with that pid may be left (issue 38).
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workflow_lib.trials.runner import LocalRunner, RetryPolicy, RunRequest
from workflow_lib.trials.types import Run
from benchmarks.compare_builders import typed_design

DESIGN = {"max_retries": 0, "run_timeout_s": 3,
          "metric": {"name": "t", "source": "process_wall", "statistic": "median", "unit": "ns", "skip_steps": 0}}
# The parent starts a grandchild-holding child that ignores SIGTERM, writes both pids, then
# hangs (mode "hang"), fails (mode "fail") or succeeds (mode "ok").
FORKS = textwrap.dedent("""
    import os, signal, sys, time
    mode, pids = sys.argv[1], sys.argv[2]
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        grandchild = os.fork()
        if grandchild == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)
            os._exit(0)
        with open(pids, "a") as fh:
            fh.write(f"{grandchild}\\n")
        time.sleep(600)
        os._exit(0)
    with open(pids, "a") as fh:
        fh.write(f"{child}\\n")
    while sum(1 for _ in open(pids)) < 2:
        time.sleep(0.01)
    if mode == "hang":
        time.sleep(600)
    sys.exit(1 if mode == "fail" else 0)
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited (its parent, init, reaps it)


def _run(tmp_path: Path, mode: str, design=DESIGN) -> tuple[Run, list[int]]:
    (tmp_path / "forks.py").write_text(FORKS)
    pids = tmp_path / f"pids-{mode}"
    spec = {"argv": [sys.executable, "forks.py", mode, str(pids)], "cwd": str(tmp_path), "env": {}}
    got = LocalRunner().run(RunRequest(spec, typed_design(design), {"index": 0, "arm": "A"}, 0, {}))
    left = [int(x) for x in pids.read_text().split()]
    return got, left


def _none_left(pids: list[int]) -> None:
    deadline = time.monotonic() + 5  # SIGKILL is asynchronous: the kernel needs a moment
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], f"processes of the run still alive: {[p for p in pids if _alive(p)]}"


@pytest.mark.parametrize("mode", ["hang", "fail", "ok"])
def test_no_process_of_a_run_is_left_after_it_ends(tmp_path, mode):
    got, pids = _run(tmp_path, mode)
    assert len(pids) == 2
    if mode == "hang":
        assert got.status == "failed" and got.error.startswith("timed out after 3 s")
    elif mode == "fail":
        assert got.status == "failed" and got.exit_code == 1
    else:
        assert got.status == "ok"
    _none_left(pids)


def test_a_timed_out_run_returns_at_its_timeout_even_when_children_hold_its_output(tmp_path):
    t0 = time.monotonic()
    _run(tmp_path, "hang")
    assert time.monotonic() - t0 < 3 + 30  # the timeout, plus starting Python on a busy machine


def _result(code: int, error: str, attempt: int) -> Run:
    return Run(index=0, arm="A", attempt=attempt, status="failed", exit_code=code, start_unix_ns=0, end_unix_ns=1,
                     metric_ns=None, values_ns=[], gpu={}, unusual=[], error=error, metric_source=None, work=None,
                     stderr_tail=[], ranks=None, capture=None, alternates=None)


def test_a_deterministic_failure_is_not_retried_to_the_limit():
    policy = RetryPolicy(max_retries=5, run_timeout_s=10)
    same = [_result(1, "exit status 1: ValueError: bad input", a) for a in range(2)]
    assert policy.retry(same[0], [same[0]])  # the first failure may pass
    assert not policy.retry(same[1], same)  # the same exit status and error line again: deterministic
    other = [_result(1, "exit status 1: ValueError: bad input", 0), _result(-9, "exit status -9", 1)]
    assert policy.retry(other[1], other)  # a different failure may still pass


def test_a_block_stops_retrying_a_deterministic_crash_and_removes_a_killed_blocks_captures(tmp_path):
    import dataclasses

    from test_trials_runner import _setup

    from workflow_lib.core import records
    from workflow_lib.trials import block as trials
    from workflow_lib.trials.runner import FakeRunner

    plan, pd, pre = _setup(tmp_path)
    plan = dataclasses.replace(plan, design=dataclasses.replace(plan.design, max_retries=5, record_runs=False))
    leftover = tmp_path / "work" / "captures" / "003-0" / "incident-of-a-killed-block"
    leftover.mkdir(parents=True)
    fake = FakeRunner(lambda req: ([], "exit status 1: ValueError: bad input"))
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work", runner=fake)
    assert len(fake.requests) == 2, [r.attempt for r in fake.requests]  # not 6: the second identical failure stops it
    assert rec.status == "too_many_failures"
    assert not (tmp_path / "work" / "captures").exists()
