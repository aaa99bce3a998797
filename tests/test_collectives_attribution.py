"""Late ranks at known steps are attributed with the right wait; nothing else is."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.collectives_helpers import analyze, clock_sync, findings_by, make_incident, ops_of
from benchmarks.fr_builders import MS, T0_NS, job

LATE = {5: (1, 30 * MS), 12: (1, 30 * MS), 20: (0, 50 * MS)}


@pytest.fixture(scope="module")
def two_rank(tmp_path_factory):
    j = job(n_steps=30, late=LATE, subgroup=[0, 1])
    # Both ranks on one named host: their CLOCK_REALTIME enqueue times may be compared.
    inc = make_incident(tmp_path_factory.mktemp("two"), "two", j.dumps, hostname="node0")
    return j, analyze([inc])


def test_every_op_matches(two_rank):
    _, a = two_rank
    assert a["summary"]["ops"] == 60 and a["summary"]["matched"] == 60
    assert [c["pg_id"] for c in a["communicators"]] == ["0", "1"]


def test_injected_steps_attributed_to_the_late_rank(two_rank):
    j, a = two_rank
    f = findings_by(a, j.steps)
    for step, (late, delay) in LATE.items():
        waiter = 1 - late
        got = f[(waiter, step)]
        assert got["verdict"] == "attributed", got
        assert abs(got["explains_ns"] - delay) <= 0.1 * delay
        assert got["evidence"][0]["late_rank"] == late and got["evidence"][0]["method"] == "gpu_duration"
        assert f[(late, step)]["verdict"] == "not_applicable"
        assert f[(late, step)]["evidence"][0]["role"] == "late"


def test_no_other_step_is_attributed(two_rank):
    j, a = two_rank
    attributed = {k for k, v in findings_by(a, j.steps).items() if v["verdict"] == "attributed"}
    assert attributed == {(1 - late, step) for step, (late, _) in LATE.items()}
    assert a["summary"]["attributed"] == 3 and a["summary"]["unresolved"] == 0


def test_subgroup_op_after_the_wait_is_not_attributed_despite_host_skew(two_rank):
    # The late rank's host also enqueued the sub-group op 30 ms late, but on the GPU the
    # other rank was still inside the world all_reduce: no wait, and durations show it.
    _, a = two_rank
    op = ops_of(a, "1")[6]
    att = op["attribution"]
    assert att["verdict"] == "not_attributed" and att["host_late_rank"] == 1
    assert att["arrival_skew_ns"] > 29 * MS


def test_world_op_records_skew_and_wait(two_rank):
    _, a = two_rank
    att = ops_of(a)[6]["attribution"]  # step 5 -> seq 6
    assert att["late_rank"] == 1 and att["host_late_rank"] == 1
    assert abs(att["wait_ns"]["0"] - 30 * MS) < 0.01 * 30 * MS
    assert att["late_host"]["observed"] is False  # FR alone has no host spans


def test_sub_communicator_of_two_of_four(tmp_path):
    j = job(n_ranks=4, n_steps=10, late={4: (3, 20 * MS)}, subgroup=[1, 3])
    a = analyze([make_incident(tmp_path, "four", j.dumps)])
    sub = [c for c in a["communicators"] if c["pg_id"] == "1"][0]
    assert sub["expected_ranks"] == [1, 3] and sub["status_counts"] == {"matched": 10}
    f = findings_by(a, j.steps)
    for r in (0, 1, 2):
        assert f[(r, 4)]["verdict"] == "attributed" and abs(f[(r, 4)]["explains_ns"] - 20 * MS) < 2 * MS
    assert sum(v["verdict"] == "attributed" for v in f.values()) == 3


def test_missing_dump_outside_the_sub_communicator_leaves_it_matched(tmp_path):
    j = job(n_ranks=4, n_steps=6, subgroup=[1, 3])
    dumps = {r: d for r, d in j.dumps.items() if r != 0}
    a = analyze([make_incident(tmp_path, "no0", dumps)])
    assert {op["status"] for op in a["ops"] if op["pg_id"] == "1"} == {"matched"}
    assert {op["status"] for op in a["ops"] if op["pg_id"] == "0"} == {"cannot_decide"}


def test_three_ranks_co_late_cannot_single_one_out(tmp_path):
    j = job(n_ranks=3, n_steps=4, late={2: (1, 10 * MS)})
    # make rank 2 late by the same amount at step 2: two late ranks within uncertainty
    e = j.dumps[2]["entries"][2]
    e["time_created_ns"] += 10 * MS
    j.dumps[2]["entries"][2]["duration_ms"] = j.dumps[1]["entries"][2]["duration_ms"]
    a = analyze([make_incident(tmp_path, "co", j.dumps)])
    att = ops_of(a)[3]["attribution"]
    assert att["verdict"] == "unresolved" and "cannot single one out" in att["reason"]


def _split(tmp_path, late_ns, *, hosts=("h0", "h1"), calib=None, with_duration=False):
    j = job(n_steps=4, late={2: (1, late_ns)}, with_duration=with_duration)
    tables = [({"clock_sync": clock_sync(*c)} if c else None) for c in (calib or (None, None))]
    a0 = make_incident(tmp_path, "r0", {0: j.dumps[0]}, hostname=hosts[0], tables=tables[0])
    a1 = make_incident(tmp_path, "r1", {1: j.dumps[1]}, hostname=hosts[1], tables=tables[1])
    return j, analyze([a0, a1])


def test_cross_host_without_calibration_is_unresolved(tmp_path):
    j, a = _split(tmp_path, 30 * MS)
    att = ops_of(a)[3]["attribution"]
    assert att["verdict"] == "unresolved" and "cannot be compared" in att["reason"]
    assert findings_by(a, j.steps)[(0, 2)]["verdict"] == "unresolved"


def test_skew_below_calibrated_clock_uncertainty_is_not_attributed(tmp_path):
    j, a = _split(tmp_path, 2 * MS, calib=((0, 2_500_000), (0, 2_500_000)))
    att = ops_of(a)[3]["attribution"]
    assert att["method"] == "host_arrival" and att["uncertainty_ns"] == 5 * MS
    assert att["verdict"] == "unresolved" and "within the uncertainty" in att["reason"]
    assert all(f["verdict"] != "attributed" for f in findings_by(a, j.steps).values())


def test_skew_above_calibrated_uncertainty_is_attributed_with_offset(tmp_path):
    # host 1's clock reads 7 ms behind the reference; calibration corrects it
    j = job(n_steps=4, late={2: (1, 30 * MS)}, with_duration=False)
    for e in j.dumps[1]["entries"]:
        e["time_created_ns"] -= 7 * MS
    a0 = make_incident(tmp_path, "r0", {0: j.dumps[0]}, hostname="h0", tables={"clock_sync": clock_sync(0, 100_000)})
    a1 = make_incident(tmp_path, "r1", {1: j.dumps[1]}, hostname="h1", tables={"clock_sync": clock_sync(7 * MS, 100_000)})
    a = analyze([a0, a1])
    att = ops_of(a)[3]["attribution"]
    assert att["verdict"] == "attributed" and att["late_rank"] == 1
    assert abs(att["wait_ns"]["0"] - 30 * MS) < 0.05 * MS
    assert ops_of(a)[2]["attribution"]["verdict"] == "not_attributed"


def test_same_host_separate_incidents_compare_directly(tmp_path):
    j, a = _split(tmp_path, 30 * MS, hosts=("node1", "node1"))
    att = ops_of(a)[3]["attribution"]
    assert att["verdict"] == "attributed" and att["uncertainty_ns"] == 0 and att["clock"] == ["reference", "same_clock"]


def test_host_context_of_the_late_rank(tmp_path):
    j = job(n_steps=4, late={2: (1, 30 * MS)})
    t_enq = j.dumps[1]["entries"][2]["time_created_ns"]
    spans = pa.table({"name": ["data_loader", "forward"], "thread_id": [7, 7], "depth": pa.array([0, 0], pa.int32()),
                      "start_ns": [t_enq - 29 * MS, t_enq - 1 * MS], "end_ns": [t_enq - 1 * MS, t_enq],
                      "rank": pa.array([1, 1], pa.int32())})
    api = pa.table({"name": ["cudaStreamSynchronize"], "thread_id": [7], "correlation_id": [1],
                    "start_ns": [t_enq - 20 * MS], "end_ns": [t_enq - 15 * MS], "is_sync": [True], "rank": pa.array([1], pa.int32())})
    sched = pa.table({"ts_ns": [t_enq - 25 * MS, t_enq - 5 * MS], "thread_id": [7, 7], "thread_name": ["py", "py"],
                      "state": ["S", "R"], "cpu_time_ns": [1, 2], "runqueue_wait_ns": [100, 4_000_100],
                      "timeslices": [1, 2], "rank": pa.array([1, 1], pa.int32())})
    inc = make_incident(tmp_path, "ctx", j.dumps, tables={"spans": spans, "runtime_api": api, "sched": sched})
    late_host = ops_of(analyze([inc]))[3]["attribution"]["late_host"]
    assert late_host["observed"] is True
    assert late_host["spans"][0]["name"] == "data_loader" and late_host["spans"][0]["overlap_ns"] == 28 * MS
    assert late_host["sync_calls"] == {"count": 1, "overlap_ns": 5 * MS, "names": ["cudaStreamSynchronize"]}
    assert late_host["sched"]["runqueue_wait_ns"] == 4 * MS and late_host["sched"]["states"] == {"S": 1, "R": 1}


def test_min_wait_threshold(tmp_path):
    j = job(n_steps=4, late={2: (1, 3 * MS)})
    inc = make_incident(tmp_path, "mw", j.dumps)
    assert ops_of(analyze([inc]))[3]["attribution"]["verdict"] == "attributed"
    assert ops_of(analyze([inc], min_wait_ns=5 * MS))[3]["attribution"]["verdict"] == "not_attributed"


def test_no_steps_in_range_is_not_applicable(tmp_path):
    j = job(n_steps=2)
    a = analyze([make_incident(tmp_path, "na", j.dumps)])
    f = findings_by(a, {0: [(99, T0_NS - 10 * MS, T0_NS - 5 * MS)]})
    assert f[(0, 99)]["verdict"] == "not_applicable"


def test_steps_keyed_by_str_rank_or_without_rank(two_rank):
    j, a = two_rank
    by_str = findings_by(a, {str(r): s for r, s in j.steps.items()})
    assert by_str[(0, 5)]["verdict"] == "attributed"
    from workflow_lib.collectives import collective_wait_findings

    unranked = collective_wait_findings(a, {None: j.steps[0][:2]})
    assert [f["verdict"] for f in unranked] == ["unresolved", "unresolved"] and unranked[0]["rank"] is None


def test_steps_from_a_pyarrow_steps_table(two_rank):
    j, a = two_rank
    table = pa.table({"step_id": [s for s, _, _ in j.steps[0]], "thread_id": [1] * len(j.steps[0]),
                      "start_ns": [b for _, b, _ in j.steps[0]], "end_ns": [e for _, _, e in j.steps[0]],
                      "rank": pa.array([0] * len(j.steps[0]), pa.int32())})
    f = findings_by(a, {0: table})
    assert f[(0, 5)]["verdict"] == "attributed" and f[(0, 6)]["verdict"] == "not_applicable"


def test_recorder_incident_on_monotonic_clock_with_fr_merged(tmp_path):
    # The recorder wrote steps on CLOCK_MONOTONIC; FR times (realtime) are shifted onto it on import.
    from workflow_lib.collectives import analyze_collectives, collective_wait_findings, steps_from_incidents
    from workflow_lib.importers.torch_fr import import_torch_fr
    from workflow_lib.core.incident import read_incident, source, write_incident
    from benchmarks.fr_builders import write_dumps

    j = job(n_steps=6, late={3: (0, 40 * MS)})
    unix_minus_host = T0_NS - 1_000 * MS
    rows = [(r, s, b - unix_minus_host, e - unix_minus_host) for r, st in j.steps.items() for s, b, e in st]
    steps = pa.table({"step_id": [x[1] for x in rows], "thread_id": [1] * len(rows), "start_ns": [x[2] for x in rows],
                      "end_ns": [x[3] for x in rows], "rank": pa.array([x[0] for x in rows], pa.int32())})
    d = tmp_path / "incidents" / "rec"
    write_incident(d, {"incident_id": "rec", "reason": "manual", "producer": "recorder",
                       "clock": {"host": "monotonic", "unix_minus_host_ns": unix_minus_host},
                       "sources": {"steps": source("observed")}, "ranks": [0, 1]}, {"steps": steps})
    import_torch_fr(write_dumps(tmp_path / "d", j.dumps), incident_id="rec", incidents_dir=tmp_path / "incidents")
    inc = read_incident(d)
    f = {(x["rank"], x["step_id"]): x for x in collective_wait_findings(analyze_collectives([inc]), steps_from_incidents([inc]))}
    assert f[(1, 3)]["verdict"] == "attributed" and abs(f[(1, 3)]["explains_ns"] - 40 * MS) < 1 * MS
    assert sum(x["verdict"] == "attributed" for x in f.values()) == 1
