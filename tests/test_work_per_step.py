"""Work per step, always known or refused (plan/work.py, plan/metric.py): a step pattern's
(?P<tokens>) group, or a config expression over each arm's own argv (no eval); a metric per
token whose runs cannot say their work is refused at config check or when the plan is made,
naming why, so a value labelled "ns per token" is never a time per step."""

from __future__ import annotations

import pytest

from workflow_lib.core.config.values import check_values as check_config
from workflow_lib.core.errors import RecordError, StallcaseError
from workflow_lib.plan import metric, work

PATTERN = r"\| ms/batch +(?P<ms>[0-9.]+) \|"
OUT = "\n".join(f"| epoch   1 | {k:5d}/  71 batches | lr 20.00 | ms/batch {t:5.2f} | loss  6.00 |"
                for k, t in ((10, 30.0), (20, 20.0), (30, 22.0), (40, 24.0)))
ARMS = {"baseline": {"argv": ["python", "main.py", "--batch_size", "20", "--bptt", "35"]},
        "candidate": {"argv": ["python", "main.py", "--batch_size=40", "--bptt", "35"]}}
SNAP = {"incident_id": "wlm", "ranks": [], "recorder": {"steps": {"from": "step_pattern", "step_pattern": PATTERN}}}


def test_the_expression_is_read_from_each_arms_own_argv():
    assert work.evaluate("--batch_size * --bptt", ARMS["baseline"]["argv"], "w") == 700.0
    assert work.evaluate("--batch_size * (--bptt + 1) / 2", ARMS["candidate"]["argv"], "w") == 720.0
    m = metric.resolve({"per": "token", "source": "auto", "tokens_per_step": "--batch_size * --bptt"}, SNAP, arms=ARMS)
    assert m["declared_work"] == {"unit": "token", "expression": "--batch_size * --bptt", "A": 700.0, "B": 1400.0}


@pytest.mark.parametrize("expr, why", [
    ("__import__('os').system('x')", "only numbers, flags"),
    ("--batch_size ** 99", "only numbers, flags"),
    ("--nhid * 2", "--nhid is not in the argv"),
    ("--batch_size *", "not an arithmetic expression"),
    ("--batch_size - 20", "must be > 0"),
])
def test_anything_but_arithmetic_over_flags_is_refused(expr, why):
    with pytest.raises(RecordError, match=why):
        work.evaluate(expr, ARMS["baseline"]["argv"], "trials.metric.tokens_per_step")


def test_the_runs_values_are_per_token_with_the_arms_work():
    m = metric.resolve({"per": "token", "source": "auto", "skip_steps": 1, "tokens_per_step": "--batch_size * --bptt"},
                       SNAP, arms=ARMS)
    a = metric.read(m, "/nonexistent", OUT, 10**9, entry={"index": 0, "arm": "A"})
    b = metric.read(m, "/nonexistent", OUT, 10**9, entry={"index": 1, "arm": "B"})
    assert a["source"] == "stdout_steps" and a["values_ns"] == [20e6 / 700, 22e6 / 700, 24e6 / 700]
    assert b["values_ns"] == [20e6 / 1400, 22e6 / 1400, 24e6 / 1400]
    assert (a["work"]["tokens_per_step"], b["work"]["tokens_per_step"]) == (700.0, 1400.0)


def test_a_tokens_group_in_the_step_pattern_carries_the_work():
    pat = r"tokens (?P<tokens>\d+) .*ms/batch +(?P<ms>[0-9.]+)"
    out = "tokens 700 x ms/batch 7.0\ntokens 700 x ms/batch 14.0\n"
    m = metric.resolve({"per": "token", "source": "auto"}, dict(SNAP, recorder={"steps": {"from": "step_pattern", "step_pattern": pat}}))
    got = metric.read(m, "/nonexistent", out, 10**9)
    assert got["values_ns"] == [1e4, 2e4] and got["work"]["tokens_per_step"] == 700.0


def test_per_token_without_work_is_refused_when_the_plan_is_made_naming_why():
    with pytest.raises(RecordError, match=r"no \(\?P<tokens>...\) group and the config declares no tokens_per_step"):
        metric.resolve({"per": "token", "source": "auto"}, SNAP, arms=ARMS)
    with pytest.raises(RecordError, match="source process_wall does not carry"):
        metric.resolve({"per": "token", "source": "process_wall"}, SNAP, arms=ARMS)


def test_per_token_from_a_source_without_work_is_refused_at_config_check():
    cfg = {"trials": {"metric": {"name": "t", "source": "process_wall", "statistic": "median", "unit": "ns", "per": "token"}}}
    with pytest.raises(StallcaseError, match="trials.metric.per"):
        check_config(cfg)
    cfg["trials"]["metric"]["tokens_per_step"] = "--batch_size * --bptt"
    check_config(cfg)
    cfg["trials"]["metric"]["tokens_per_step"] = "open('x')"
    with pytest.raises(StallcaseError, match="tokens_per_step"):
        check_config(cfg)


def test_a_wall_time_is_never_returned_as_a_time_per_token():
    m = {"per": "token", "source": "auto", "statistic": "median"}
    with pytest.raises(metric.MetricUnreadable, match="not a time per token"):
        metric.read(m, "/nonexistent", "no steps printed", 10**9)


def test_work_flags_that_differ_between_the_arms_are_named():
    got = work.changed_flags(ARMS["baseline"]["argv"], ARMS["candidate"]["argv"])
    assert got == ["--batch_size 20 -> 40"]
    assert work.changed_flags(["p", "--nhid", "32"], ["p", "--nhid", "64"]) == []
    assert work.changed_flags(["p"], ["p", "--micro_batches", "4"]) == ["--micro_batches (absent) -> 4"]
