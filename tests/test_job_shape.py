"""The job metric from the job's shape (plan/job_shape.py, plan/job_metric.py), one test per
shape: a synchronous job (a collective in every step) keeps the slowest rank per step; a
pipeline (queue waits, producer/consumer roles) gets its consumers' throughput, or its
producers' when the recording shows the consumers waiting on them most of the time; ranks that
do not synchronize get the job's throughput; the plan records the shape, why, and who chose it.
The H200 producer/consumer fixture's recorded job reads as a pipeline fed by its producer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from workflow_lib.capture.types import StepsOut
from workflow_lib.core.incident import read_incident
from workflow_lib.plan import job_metric, job_shape, metric

H200_MP = Path(__file__).resolve().parent / "fixtures" / "h200" / "multiprocess" / "incident"
MS = 1_000_000


def _incident(ranks: int, steps: int, spans_of) -> SimpleNamespace:
    """A job of `ranks` ranks with `steps` 10 ms steps each; spans_of(rank, step) -> span names."""
    st = {"rank": [], "step_id": [], "start_ns": [], "end_ns": []}
    sp = {"rank": [], "name": [], "start_ns": [], "end_ns": []}
    for r in range(ranks):
        for s in range(steps):
            t0 = s * 10 * MS + r * 100
            st["rank"].append(r), st["step_id"].append(s), st["start_ns"].append(t0), st["end_ns"].append(t0 + 10 * MS)
            for k, name in enumerate(spans_of(r, s)):
                sp["rank"].append(r), sp["name"].append(name)
                sp["start_ns"].append(t0 + (k + 1) * MS), sp["end_ns"].append(t0 + (k + 2) * MS)
    tables = {"steps": pa.table(st), "spans": pa.table(sp)}
    return SimpleNamespace(table=lambda name: tables[name])


def _snapshot(ranks, roles=None):
    return {"incident_id": "j", "ranks": ranks, "job": {"roles": {str(r): v for r, v in (roles or {}).items()}}}


def test_a_collective_every_step_keeps_the_slowest_rank_per_step():
    inc = _incident(3, 20, lambda r, s: ["forward", "all_reduce"])
    shape = job_shape.classify(inc, {})
    assert shape["kind"] == "collective" and "all_reduce" in shape["reason"]
    m = job_metric.resolve({"per": "step"}, _snapshot([0, 1, 2]), shape)
    assert m["job"] == "slowest_rank" and m.get("role") is None
    assert m["shape"] == {"kind": "collective", "reason": shape["reason"], "chosen_by": "recording"}


def test_a_queue_pipeline_gets_its_consumers_throughput():
    roles = {0: "consumer", 1: "consumer", 2: "producer"}
    inc = _incident(3, 20, lambda r, s: ["queue_get", "forward"] if r < 2 else ["pack"])
    shape = job_shape.classify(inc, roles)
    assert shape["kind"] == "pipeline" and shape["work_role"] == "consumer"
    assert "queue_get" in shape["reason"] and "throughput" in shape["reason"]
    m = job_metric.resolve({"per": "step"}, _snapshot([0, 1, 2], roles), shape)
    assert (m["job"], m["role"], m["ranks"]) == ("throughput", "consumer", [0, 1])


def test_ranks_that_do_not_synchronize_get_the_jobs_throughput():
    inc = _incident(2, 20, lambda r, s: ["forward", "backward"])
    shape = job_shape.classify(inc, {})
    assert shape["kind"] == "independent" and "do not synchronize" in shape["reason"]
    m = job_metric.resolve({"per": "step"}, _snapshot([0, 1]), shape)
    assert (m["job"], m.get("role"), m["ranks"]) == ("throughput", None, None)


def test_a_collective_in_only_a_few_steps_is_not_a_synchronous_job():
    inc = _incident(2, 20, lambda r, s: ["forward"] + (["all_reduce"] if s % 5 == 0 else []))
    assert job_shape.classify(inc, {})["kind"] == "independent"


def test_a_metric_the_user_chose_is_kept_and_the_shape_still_says_what_was_seen():
    roles = {0: "consumer", 1: "consumer", 2: "producer"}
    inc = _incident(3, 20, lambda r, s: ["queue_get"] if r < 2 else ["pack"])
    shape = job_shape.classify(inc, roles)
    m = job_metric.resolve({"per": "step", "job": "slowest_rank", "role": "consumer"}, _snapshot([0, 1, 2], roles), shape)
    assert (m["job"], m["role"]) == ("slowest_rank", "consumer")
    assert m["shape"]["kind"] == "pipeline" and m["shape"]["chosen_by"] == "config"


def _waits(wait_ms_of):
    """A 3-rank pipeline whose consumers (ranks 0, 1) spend wait_ms_of(step) of each 10 ms step in queue_get."""
    def spans(r, s):
        return ["queue_get", "forward"] if r < 2 else ["pack"]
    inc = _incident(3, 20, spans)
    sp = inc.table("spans").to_pydict()
    for k, name in enumerate(sp["name"]):
        if name == "queue_get":
            step = (sp["start_ns"][k] - MS) // (10 * MS)
            sp["end_ns"][k] = sp["start_ns"][k] + int(wait_ms_of(step) * MS)
    tables = {"steps": inc.table("steps"), "spans": pa.table(sp)}
    return SimpleNamespace(table=lambda name: tables[name])


def test_a_pipeline_whose_consumers_mostly_wait_is_judged_by_its_producers_throughput():
    """The consumers wait on the queue for 8 of every 10 ms, the producer never: the producer sets
    the job's rate, and its throughput is the default; the plan records each role's wait share
    over the counted steps (after skip_steps: a first step's wait is the job starting, not counted)."""
    roles = {0: "consumer", 1: "consumer", 2: "producer"}
    inc = _waits(lambda s: 8.0 if s > 0 else 0.5)
    shape = job_shape.classify(inc, roles, skip_steps=1)
    assert (shape["kind"], shape["work_role"], shape["bound_role"]) == ("pipeline", "producer", "producer"), shape
    assert shape["wait_share"] == {"consumer": 0.8, "producer": 0.0}
    assert "80%" in shape["reason"] and "the producers set the job's rate" in shape["reason"], shape["reason"]
    m = job_metric.resolve({"per": "step"}, _snapshot([0, 1, 2], roles), shape)
    assert (m["job"], m["role"], m["ranks"]) == ("throughput", "producer", [2])
    assert m["shape"]["bound_role"] == "producer" and m["shape"]["wait_share"] == shape["wait_share"]
    # Under half the consumers' time: they are not fed by a slower role, and their own throughput stays.
    shape = job_shape.classify(_waits(lambda s: 4.0), roles)
    assert (shape["work_role"], shape.get("bound_role")) == ("consumer", None), shape
    assert shape["wait_share"]["consumer"] == pytest.approx(0.4)


def test_the_h200_producer_consumer_recording_is_judged_by_its_producer():
    """The H200 job's recording: the consumers waited on the queue for 87% of their counted step
    time (after the plan's 3 skipped steps; 66% with the first, CUDA's set-up, counted), the
    producer for none of its own: the producer's throughput is the default."""
    inc = read_incident(H200_MP)
    roles = {int(r): v for r, v in inc.manifest["job"]["roles"].items()}
    shape = job_shape.classify(inc, roles, skip_steps=3)
    assert shape["kind"] == "pipeline" and shape["bound_role"] == shape["work_role"] == "producer", shape
    assert shape["wait_share"]["consumer"] > 0.8 and shape["wait_share"]["producer"] == 0.0, shape


def test_a_role_counts_every_process_of_it_in_each_run():
    """The candidate runs three producers where the recording held one: a role's throughput adds
    up this run's processes of that role, not the recording's rank numbers."""
    def rec(rank, role, step_ns):
        return StepsOut(covers="iteration", steps_ns=[step_ns] * 6, items=None, tokens=None, unusual=[], rank=rank,
                        role=role, pid=rank + 1)
    m = {"per": "step", "job": "throughput", "role": "producer", "ranks": [2], "expect_ranks": [0, 1, 2]}
    one = job_metric.reduce(m, [rec(0, "consumer", 9), rec(1, "consumer", 9), rec(2, "producer", 6)], 10**9)
    three = job_metric.reduce(m, [rec(0, "consumer", 3), rec(1, "consumer", 3)] + [rec(r, "producer", 6) for r in (2, 3, 4)],
                              10**9)
    assert one["values_ns"] == [6.0] and three["values_ns"] == [2.0]
    assert [(r["rank"], r["counted"]) for r in three["ranks"]] == [(2, True), (3, True), (4, True), (0, False), (1, False)]


def test_throughput_adds_the_counted_ranks_rates_and_alternates_cover_every_role():
    recs = [StepsOut(covers="iteration", steps_ns=[9, 4, 4, 4], items=None, tokens=None, unusual=[], rank=0, role="consumer", pid=1),
            StepsOut(covers="iteration", steps_ns=[9, 2, 2, 2], items=None, tokens=None, unusual=[], rank=1, role="consumer", pid=2),
            StepsOut(covers="iteration", steps_ns=[9, 3, 3, 3], items=None, tokens=None, unusual=[], rank=2, role="producer", pid=3)]
    m = {"per": "step", "skip_steps": 1, "job": "throughput", "role": "consumer", "ranks": [0, 1], "expect_ranks": [0, 1, 2]}
    got = job_metric.reduce(m, recs, 10**9)
    assert got["values_ns"] == [1 / (1 / 4 + 1 / 2)]  # rank 0 does a step in 4 ns, rank 1 in 2: 0.75 steps/ns
    assert [(r["rank"], r["counted"], r["total_ns"]) for r in got["ranks"]] == [(0, True, 12), (1, True, 6), (2, False, 9)]
    alt = got["alternates"]
    assert alt["job=throughput,role=consumer"] == 1 / 0.75 and alt["job=slowest_rank,role=consumer"] == 4.0
    assert alt["job=throughput,role=producer"] == 3.0 and alt["job=throughput"] == 1 / (1 / 4 + 1 / 2 + 1 / 3)
    assert job_metric.config_line("job=throughput,role=consumer") == "trials: {metric: {job: throughput, role: consumer}}"


def test_throughput_reads_each_ranks_typical_step_so_a_peers_exit_does_not_move_it():
    """A consumer's last steps, slowed while the other consumer wrote its capture, and one step
    stalled by the machine: the median over windows keeps the rate of the typical window; `mean`
    is the exact total (counted time over counted steps)."""
    steady = [17e6] * 20
    recs = [StepsOut(covers="iteration", steps_ns=[90e6] + steady + [40e6, 45e6], items=None, tokens=None, unusual=[], rank=0,
                     role="consumer", pid=1),
            StepsOut(covers="iteration", steps_ns=[80e6] + steady[:10] + [140e6] + steady[10:], items=None, tokens=None,
                     unusual=[], rank=1, role="consumer", pid=2)]
    m = {"per": "step", "skip_steps": 1, "job": "throughput", "ranks": [0, 1], "expect_ranks": [0, 1]}
    assert job_metric.reduce(m, recs, 10**9)["values_ns"] == [pytest.approx(8.5e6, rel=1e-12)]
    # A consumer that drains the queue at once: bursts of fast steps, then a wait. Its rate is
    # 3 steps per 24 ns; one step's median (2 ns) would read the burst as its rate.
    bursty = StepsOut(covers="iteration", steps_ns=[50] + [2, 2, 20] * 6, items=None, tokens=None, unusual=[], rank=0,
                      role="consumer", pid=1)
    assert job_metric.reduce(dict(m, ranks=[0], expect_ranks=[0]), [bursty], 10**9)["values_ns"] == [8.0]
    exact = job_metric.reduce(dict(m, statistic="mean"), recs, 10**9)["values_ns"][0]
    assert exact == pytest.approx(1 / (22 / (20 * 17e6 + 85e6) + 21 / (20 * 17e6 + 140e6)), rel=1e-12)
    assert exact > 1.2 * 8.5e6
    with pytest.raises(job_metric.JobMetricUnreadable, match="no step declared its items"):
        job_metric.reduce(dict(m, per="item"), recs, 10**9)


def test_metric_resolve_reads_the_shape_from_the_store_when_given(tmp_path):
    """Without a store (an older caller) no shape is recorded and the default stays the slowest rank."""
    m = metric.resolve({"per": "step", "source": "auto"}, _snapshot([0, 1], {0: "consumer", 1: "producer"}))
    assert m["job"] == "slowest_rank" and "shape" not in m


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
