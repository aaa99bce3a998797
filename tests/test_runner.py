"""The executor seam (runner.py) and the job metric (job_metric.py): the fake runner returns what
the real one returns; a multi-process run's value is its slowest rank per step (or a role's);
a rank that writes nothing fails the run naming it; a failed run says why."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from workflow_lib.capture.types import StepsOut
from workflow_lib.trials.types import Execution
from benchmarks.compare_builders import typed_design
from workflow_lib.plan import job_metric, metric
from workflow_lib.core import records
from workflow_lib.trials.runner import FakeRunner, LocalRunner, RetryPolicy, RunRequest, failure_reason

DESIGN = {"max_retries": 1, "run_timeout_s": 60,
          "metric": {"name": "t", "source": "auto", "statistic": "median", "unit": "ns", "skip_steps": 0}}
# Three ranks of one run, each writing its own steps-out as the recorder does (rank 1 slow at step 1).
RANKS = textwrap.dedent("""
    import json, os, sys
    d = os.environ["STALLCASE_STEPS_OUT_DIR"]
    steps = {0: [10, 10, 10, 10], 1: [11, 50, 11], 2: [12, 12, 12, 12, 12]}
    fail = os.environ.get("FAIL_RANK")
    for r, s in steps.items():
        if fail is not None and r == int(fail):
            continue
        rec = {"schema_version": 2, "kind": "steps_out", "covers": "iteration", "steps_ns": s, "items": None,
               "tokens": None, "unusual": [], "rank": r, "role": "producer" if r == 0 else "consumer", "pid": 100 + r}
        open(os.path.join(d, f"steps-rank{r}-{100 + r}.json"), "w").write(json.dumps(rec))
""")


def _req(tmp_path, argv, design=DESIGN, **env):
    spec = {"argv": argv, "cwd": str(tmp_path), "env": dict(env)}
    return RunRequest(spec, typed_design(design), {"index": 0, "arm": "A"}, 0, {})


def _job_design(**kw):
    m = job_metric.resolve(dict(DESIGN["metric"], **kw), {"incident_id": "j", "ranks": [0, 1, 2],
                                                         "job": {"roles": {"0": "producer", "1": "consumer", "2": "consumer"}}})
    return dict(DESIGN, metric=m)


def test_the_fake_and_the_real_runner_return_the_same_fields(tmp_path):
    (tmp_path / "ranks.py").write_text(RANKS)
    real = LocalRunner().run(_req(tmp_path, [sys.executable, "ranks.py"], _job_design()))
    fake = FakeRunner(lambda req: ([1.0, 2.0], None)).run(_req(tmp_path, ["x"], _job_design()))
    assert type(real) is type(fake)
    assert real.status == fake.status == "ok"
    assert set(real.to_json()) == set(fake.to_json())
    # a multi-process run's ranks as the runner's dicts wrote them before runs were typed (d9bb896)
    assert [list(r) for r in real.to_json()["ranks"]] == [["rank", "role", "steps", "median_ns", "total_ns", "counted"]] * 3
    real_failed = LocalRunner().run(_req(tmp_path, [sys.executable, "-c", "import sys; sys.exit(3)"]))
    fake_failed = FakeRunner(lambda req: ([], "exit status 3")).run(_req(tmp_path, ["x"]))
    assert set(real_failed.to_json()) == set(fake_failed.to_json())
    for r in (real, fake, real_failed, fake_failed):  # both are execution-record runs
        records.validate({"schema_version": 3, "kind": "execution", "block": "b000", "plan_digest": "0" * 64,
                          "preflight_digest": "0" * 64, "node": "n", "started_unix_ns": 0, "ended_unix_ns": 1,
                          "status": "complete", "runs": [r.to_json()], "notes": []}, "execution")


def test_a_multi_process_run_is_its_slowest_rank_per_step_every_rank_reached(tmp_path):
    (tmp_path / "ranks.py").write_text(RANKS)
    got = LocalRunner().run(_req(tmp_path, [sys.executable, "ranks.py"], _job_design()))
    assert got.values_ns == [12.0, 50.0, 12.0]  # 3 steps every rank reached; rank 1's slow step counts
    assert [(r.rank, r.role) for r in got.ranks] == [(0, "producer"), (1, "consumer"), (2, "consumer")]
    producers = LocalRunner().run(_req(tmp_path, [sys.executable, "ranks.py"], _job_design(role="producer")))
    assert producers.values_ns == [10.0] * 4


def test_a_rank_that_writes_nothing_fails_the_run_naming_it(tmp_path):
    (tmp_path / "ranks.py").write_text(RANKS)
    got = LocalRunner().run(_req(tmp_path, [sys.executable, "ranks.py"], _job_design(), FAIL_RANK="2"))
    assert got.status == "failed" and "rank 2 wrote no steps" in got.error
    assert not RetryPolicy.of(typed_design(DESIGN)).retry(got)  # the same program reads the same nothing


def test_a_failed_run_keeps_its_stderr_and_says_why(tmp_path):
    prog = "import sys; print('[rank0]: Traceback', file=sys.stderr); print('[rank0]: ValueError: MASTER_ADDR expected', file=sys.stderr); sys.exit(1)"
    got = LocalRunner().run(_req(tmp_path, [sys.executable, "-c", prog]))
    assert got.error == "exit status 1: rank 0 exited: ValueError: MASTER_ADDR expected"
    assert got.stderr_tail[-1] == "[rank0]: ValueError: MASTER_ADDR expected"
    assert RetryPolicy.of(typed_design(DESIGN)).retry(got)


@pytest.mark.parametrize("stderr, want", [
    ("", "exit status 2"),
    ("Traceback (most recent call last):\n  File x\nKeyError: 'a'\n", "exit status 2: KeyError: 'a'"),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n  rank      : 1 (local_rank: 1)\n",
     "exit status 2: rank 1 exited: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"),
])
def test_failure_reason(stderr, want):
    assert failure_reason(2, stderr) == want


def test_the_job_metric_is_resolved_into_the_plan_and_checked():
    snap = {"incident_id": "j", "ranks": [0, 1], "job": {"roles": {"0": "producer", "1": "consumer"}}}
    m = metric.resolve(dict(DESIGN["metric"], role="consumer"), snap)
    assert (m["job"], m["ranks"], m["expect_ranks"]) == ("slowest_rank", [1], [0, 1])
    assert "consumer ranks" in metric.describe(m)
    from workflow_lib.core.errors import RecordError

    with pytest.raises(RecordError, match="trials.metric.role"):
        metric.resolve(dict(DESIGN["metric"], role="trainer"), snap)
    with pytest.raises(RecordError, match="trials.metric.ranks"):
        metric.resolve(dict(DESIGN["metric"], ranks=[5]), snap)
    single = metric.resolve(dict(DESIGN["metric"]), {"incident_id": "s", "ranks": []})
    assert "expect_ranks" not in single  # a single-process plan is as before


def test_job_wall_and_throughput():
    recs = [StepsOut(covers="iteration", steps_ns=[5, 5], items=[2, 2], tokens=None, unusual=[], rank=r, role=None, pid=r)
            for r in (0, 1)]
    assert job_metric.reduce({"job": "wall", "expect_ranks": [0, 1]}, recs, 1000)["values_ns"] == [1000.0]
    # throughput: the ranks' rates add (side by side): two ranks of 5 ns steps, 2 items each
    assert job_metric.reduce({"job": "throughput", "expect_ranks": [0, 1]}, recs, 1000)["values_ns"] == [5.0 / 2]
    assert job_metric.reduce({"job": "throughput", "per": "item", "expect_ranks": [0, 1]}, recs, 1000)["values_ns"] == [2.5 / 2]


def test_a_single_process_in_the_directory_reads_as_before(tmp_path):
    d = tmp_path / "steps"
    d.mkdir()
    (d / "steps-pid7.json").write_text(json.dumps({"schema_version": 2, "kind": "steps_out", "covers": "iteration",
                                                   "steps_ns": [3, 4], "items": None, "tokens": None, "unusual": []}))
    got = metric.read(DESIGN["metric"], tmp_path / "absent.json", "", 0, d)
    assert got["values_ns"] == [3.0, 4.0] and got["source"] == "recorder_steps" and "ranks" not in got


def test_the_end_of_run_line_says_why_runs_failed():
    from workflow_lib.compare.build import failure_summary
    from workflow_lib.report.glance import verdict_line

    why = "exit status 1: rank 0 exited: ValueError: MASTER_ADDR expected"
    def run(index, error):
        req = RunRequest({"argv": ["x"], "cwd": ".", "env": {}}, typed_design(DESIGN), {"index": index, "arm": "A"}, 0, {})
        return FakeRunner(lambda req: ([1.0], error)).run(req)  # a typed Run, as the block writes it

    runs = [run(0, why), run(0, why), run(1, None)]
    def block(b, its_runs):
        return Execution(block=b, plan_digest="0" * 64, preflight_digest="0" * 64, node="n", status="complete", runs=its_runs)

    executions = {"b000": block("b000", runs), "b001": block("b001", runs[2:])}
    assert failure_summary(executions, 2) == f"1 of 2 blocks had failed runs: {why}"
    assert failure_summary({"b001": block("b001", runs[2:])}, 1) is None
    from benchmarks import compare_builders as CB
    from workflow_lib.compare.build import compare

    pl = CB.plan(CB.design(blocks=6))
    ex, digests, pd = CB.executions(pl, lambda k, arm, i: 1.0, failed=frozenset(
        e["index"] for e in pl["schedule"]["b000"]))
    rec = compare(*CB.typed_records(pl, ex), digests, pd)
    records.validate(rec.to_json(), "comparison")
    assert rec.failure_summary == "6 of 6 blocks had failed runs: exit status 1"  # the same indices fail in every block
    assert rec.failure_summary in verdict_line(rec, "inc-1")
