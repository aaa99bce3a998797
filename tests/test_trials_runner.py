import json
import os

from workflow_lib.plan import build as P, rebuild as R
from workflow_lib.preflight import check as PF
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.trials import block as trials

from incident_factory import make_incident
from test_plan import DESIGN


def _setup(tmp_path, candidate="baseline", design=DESIGN):
    inc = make_incident(tmp_path)
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    plan = P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=design, candidate=candidate)
    pd = records.digest_of(plan)
    pre = PF.preflight(plan, pd, "b000", tmp_path / "results", results_dir=tmp_path / "results")
    assert pre["status"] == "pass", PF.readable_diff(pre)
    return plan, pd, pre


def test_block_runs_schedule_in_order_with_fresh_processes(tmp_path):
    plan, pd, pre = _setup(tmp_path, candidate={"set_args": {"--delay-ms": "3"}})
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work")
    records.validate(rec.to_json(), "execution")
    assert rec.status == "complete"
    assert [r.arm for r in rec.runs] == [e["arm"] for e in plan.schedule["b000"]]
    assert all(r.status == "ok" and len(r.values_ns) == 6 for r in rec.runs)
    a = [r.metric_ns for r in rec.runs if r.arm == "A"]
    b = [r.metric_ns for r in rec.runs if r.arm == "B"]
    assert min(b) > max(a)  # 3 ms sleeps vs 1 ms sleeps
    assert all(r.gpu["status"] == "not_observed" and r.gpu["reason"] for r in rec.runs)


def test_failed_runs_retried_recorded_and_block_marked(tmp_path):
    plan, pd, pre = _setup(tmp_path, candidate={"env": {"TORCH_TEST_FAIL": "1"}})
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work")
    records.validate(rec.to_json(), "execution")
    # the candidate arm's runs: B, and the warm-up that warms B
    cand = {e["index"] for e in plan.schedule["b000"] if "B" in (e["arm"], e.get("warms"))}
    b_runs = [r for r in rec.runs if r.index in cand]
    # the candidate's first run failed every attempt (all kept); the block stopped there
    assert len(b_runs) == DESIGN["max_retries"] + 1 and len({r.index for r in b_runs}) == 1
    assert all(r.status == "failed" and r.exit_code == 3 and r.metric_ns is None for r in b_runs)
    assert rec.status == "too_many_failures"
    first = b_runs[0]
    assert any(n.startswith(f"stopped after run {first.index} ({first.arm})") and "exit status 3" in n for n in rec.notes)
    assert rec.runs[-1] is b_runs[-1] or rec.runs[-1].index == first.index


def test_unreadable_metric_stops_the_block_at_once(tmp_path):
    # a program that exits 0 without reporting steps: no retries, no further runs
    plan, pd, pre = _setup(tmp_path, candidate="baseline",
                           design=dict(DESIGN, metric=dict(DESIGN["metric"], source="recorder_steps")))
    for arm in (plan.arms.baseline, plan.arms.candidate):
        arm.env["STALLCASE_TEST_NO_STEPS"] = "1"
    rec = trials.run_block(plan, records.digest_of(plan), pre, records.digest_of(pre), "b000",
                           tmp_path / "results", tmp_path / "work")
    records.validate(rec.to_json(), "execution")
    assert len(rec.runs) == 1 and rec.runs[0].error.startswith("metric unreadable: the run wrote no STALLCASE_STEPS_OUT")
    assert rec.status == "too_many_failures" and "not started" in rec.notes[0]


def test_auto_metric_falls_back_to_process_wall_and_says_so(tmp_path):
    plan, pd, pre = _setup(tmp_path, candidate="baseline", design=dict(DESIGN, metric=dict(DESIGN["metric"], source="auto")))
    for arm in (plan.arms.baseline, plan.arms.candidate):
        arm.env["STALLCASE_TEST_NO_STEPS"] = "1"
    rec = trials.run_block(plan, records.digest_of(plan), pre, records.digest_of(pre), "b000",
                           tmp_path / "results", tmp_path / "work")
    assert rec.status == "complete"
    assert {r.metric_source for r in rec.runs} == {"process_wall"}
    assert all(len(r.values_ns) == 1 and r.values_ns[0] == r.end_unix_ns - r.start_unix_ns for r in rec.runs)
    assert any("process wall time" in n for n in rec.notes)


def test_environment_outside_allow_list_not_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "do-not-leak")
    dump = tmp_path / "env.json"
    plan, pd, pre = _setup(tmp_path, candidate={"append_args": ["--dump-env", str(dump)]})
    spec = R.materialize_arm(plan, "B", tmp_path / "results", tmp_path / "wB")
    run = trials.one_run(spec, plan.design, {"index": 0, "arm": "B"}, 0, None)
    assert run.status == "ok"
    names = set(json.loads(dump.read_text()))
    assert "SECRET_TOKEN" not in names
    assert "STALLCASE_STEPS_OUT" in names and names <= set(trials.NODE_ENV) | {"STALLCASE_STEPS_OUT", "STALLCASE_STEPS_OUT_DIR", "STALLCASE_TRIAL_ARM", "STALLCASE_RECORDER", "PWD", "LC_CTYPE"}


def test_no_shell_in_runner():
    import inspect

    from workflow_lib.trials import runner

    src = inspect.getsource(trials) + inspect.getsource(P) + inspect.getsource(runner)
    assert "shell=True" not in src and "os.system" not in src


def test_warmup_runs_go_to_each_arm(tmp_path):
    """The candidate fails on purpose (exit 3): its warm-up, run from its own work dir, fails too."""
    plan, pd, pre = _setup(tmp_path, candidate={"env": {"TORCH_TEST_FAIL": "1"}})
    warm = [e for e in plan.schedule["b000"] if e["arm"] == "warmup"]
    assert [e["warms"] for e in warm] == ["A", "B"] * DESIGN["warmup_runs"]
    rec = trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", tmp_path / "results", tmp_path / "work")
    by_index = {}
    for r in rec.runs:
        by_index[r.index] = r
    outcome = [(e["warms"], by_index[e["index"]].exit_code) for e in warm]
    assert outcome == [("A", 0), ("B", 3)] * DESIGN["warmup_runs"]
