"""A run whose runs all failed (issue 38): rule `made` fails for it, so `latest` never moves to it
and the same command runs that job again and ends the same way (the end-to-end runs are in
tests/test_hardening_e2e.py). Here: the rule entry and the end lines, from records built in place."""

from __future__ import annotations

import os

import pytest

from benchmarks import compare_builders as CB
from workflow_lib.compare.build import compare
from workflow_lib.core import layout, records, rulelog, typed
from workflow_lib.core.errors import StallcaseError
from workflow_lib.core.types import Made
from workflow_lib.report import rule, terminal

RUN, PREV = "ab-0123456789ab", "ab-ba9876543210"


def _comparison(results, failed: bool) -> str:
    pl = CB.plan(CB.design(blocks=6))
    every = frozenset(e["index"] for e in pl["schedule"]["b000"]) if failed else frozenset()
    ex, digests, pd = CB.executions(pl, CB.lognormal_values(3), failed=every)
    path = layout.comparison(str(results), "inc-1", RUN)
    records.write_record(path, compare(*CB.typed_records(pl, ex), digests, pd).to_json(), "comparison")
    return path


def test_made_marks_a_run_that_made_its_comparison_and_refuses_one_that_could_not(tmp_path):
    ok = _comparison(tmp_path / "ok", failed=False)
    out = layout.made(str(tmp_path / "ok"), "inc-1", RUN)
    assert rule.run_made(ok, "inc-1", RUN, out) == f"made: {RUN}"
    made = typed.read(out, Made)
    assert made.run == RUN and made.comparison_digest == records.digest_of(records.read_record(ok, "comparison"))
    failed = _comparison(tmp_path / "failed", failed=True)
    out = layout.made(str(tmp_path / "failed"), "inc-1", RUN)
    with pytest.raises(StallcaseError, match="no comparison could be made: 0 valid block"):
        rule.run_made(failed, "inc-1", RUN, out)
    assert not os.path.lexists(out)


def test_the_made_rules_error_ends_the_run_with_its_verdict_and_why(tmp_path):
    results = tmp_path / "results"
    comparison = _comparison(results, failed=True)
    inc = results / "inc-1"
    (inc / "runs" / PREV).mkdir(parents=True)
    os.symlink(f"runs/{PREV}", inc / "latest")  # the earlier good run
    log = layout.made_log(str(results), "inc-1", RUN)
    with pytest.raises(StallcaseError):
        rulelog.logged(log, rule.run_made, comparison, "inc-1", RUN, layout.made(str(results), "inc-1", RUN))
    lines = terminal.error_lines(results, "inc-1", None, RUN)
    assert lines[0].startswith("stallcase: inc-1: ") and "6 of 6 blocks had failed runs" in lines[0]
    assert lines[-2].endswith("the same command with --forcerun trials"), lines
    assert lines[-1] == (f"stallcase: failed: no comparison could be made: 0 valid block(s), "
                         f"{typed.read(comparison, rule.Comparison).method.min_valid_blocks} needed; "
                         f"6 of 6 blocks had failed runs: exit status 1; results/inc-1/ still shows run {PREV}")
    # Another stage's error, written first, stays the run's error with its fix.
    other = layout.run_log(str(results), "inc-1", RUN, "trials-b000.log")
    os.makedirs(os.path.dirname(other), exist_ok=True)
    with open(other, "w", encoding="utf-8") as fh:
        fh.write("error: somewhere: broke\n")
    t = os.stat(log).st_mtime_ns - 1000  # written just before made.log, after this run began
    assert t / 1e9 > terminal.STARTED
    os.utime(other, ns=(t, t))
    assert terminal.error_lines(results, "inc-1", None, RUN)[0] == "stallcase: error: somewhere: broke"
