"""Matching on (communicator, sequence number): mismatches, culprits, missing dumps, wrapped buffers."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.collectives_helpers import analyze, findings_by, make_incident, ops_of
from benchmarks.fr_builders import MS, T0_NS, cut, job


def _mismatch(op: dict, field: str) -> dict:
    return [m for m in op["mismatches"] if m["field"] == field][0]


def test_missing_rank_dump_cannot_decide(tmp_path):
    j = job(n_steps=8, late={3: (1, 30 * MS)})
    a = analyze([make_incident(tmp_path, "m", {0: j.dumps[0]})])
    assert a["summary"]["cannot_decide"] == 8 and a["summary"]["attributed"] == 0
    assert all(op["missing_dump_ranks"] == [1] for op in a["ops"])
    assert a["communicators"][0]["ranks_missing_dump"] == [1]
    f = findings_by(a, j.steps)
    assert f[(0, 3)]["verdict"] == "unresolved" and "cannot_decide" in f[(0, 3)]["missing"][0]
    assert f[(1, 3)]["verdict"] == "unresolved" and "dump is missing" in f[(1, 3)]["missing"][0]


@pytest.mark.parametrize("field,mutate", [
    ("input_sizes", lambda e: e.update(input_sizes=[[2048]], output_sizes=[[2048]])),
    ("dtypes", lambda e: e.update(input_dtypes=["BFloat16"], output_dtypes=["BFloat16"])),
    ("op_type", lambda e: e.update(profiling_name="nccl:broadcast")),
])
def test_three_ranks_majority_names_the_culprit(tmp_path, field, mutate):
    j = job(n_ranks=3, n_steps=6)
    mutate(j.dumps[2]["entries"][3])
    a = analyze([make_incident(tmp_path, "mm", j.dumps)])
    op = ops_of(a)[4]
    assert op["status"] == "mismatch"
    m = _mismatch(op, field)
    assert m["decided"] is True and m["culprit_ranks"] == [2] and "2 of 3" in m["reason"]
    assert a["summary"]["mismatch"] == 1 and a["summary"]["matched"] == 5
    assert a["communicators"][0]["first_problem"] == {"seq_id": 4, "status": "mismatch"}
    assert all(f["verdict"] == "unresolved" for (r, s), f in findings_by(a, j.steps).items() if s == 3)


def test_two_ranks_size_mismatch_cannot_decide(tmp_path):
    j = job(n_steps=4)
    j.dumps[1]["entries"][1].update(input_sizes=[[8]], output_sizes=[[8]])
    op = ops_of(analyze([make_incident(tmp_path, "m2", j.dumps)]))[2]
    m = _mismatch(op, "input_sizes")
    assert op["status"] == "mismatch" and m["decided"] is False and m["culprit_ranks"] == []
    assert m["reason"].startswith("cannot decide: two ranks disagree")
    assert json.loads(m["values"]["1"]) == [[8]]


def test_mismatch_with_a_missing_dump_cannot_decide(tmp_path):
    # 4 members, rank 3's dump missing, 2 say 1024 and 1 says 2048: rank 3 could tip it.
    j = job(n_ranks=4, n_steps=3)
    j.dumps[2]["entries"][0].update(input_sizes=[[2048]], output_sizes=[[2048]])
    dumps = {r: d for r, d in j.dumps.items() if r != 3}
    op = ops_of(analyze([make_incident(tmp_path, "mm4", dumps)]))[1]
    m = _mismatch(op, "input_sizes")
    assert op["status"] == "mismatch" and m["decided"] is False and "[3] are missing" in m["reason"]


def test_all_to_all_sizes_may_differ(tmp_path):
    j = job(n_steps=2)
    for r, d in j.dumps.items():
        d["entries"][0].update(profiling_name="nccl:all_to_all_single", input_sizes=[[10 + r]], output_sizes=[[20 - r]])
    assert ops_of(analyze([make_incident(tmp_path, "a2a", j.dumps)]))[1]["status"] == "matched"


def test_rank_that_never_joined(tmp_path):
    j = job(n_steps=12)
    cut(j.dumps[1], j.dumps[1]["entries"][:8])  # rank 1 stopped after seq 8 (its counters too)
    a = analyze([make_incident(tmp_path, "nj", j.dumps)])
    ops = ops_of(a)
    assert ops[8]["status"] == "matched" and ops[9]["status"] == "not_joined"
    assert ops[9]["not_joined_ranks"] == [1] and _mismatch(ops[9], "joined")["culprit_ranks"] == [1]
    assert a["summary"]["not_joined"] == 4


def test_rank_that_skipped_one_op(tmp_path):
    j = job(n_steps=6)
    del j.dumps[0]["entries"][2]  # rank 0 has seq 1,2,4,5,6
    ops = ops_of(analyze([make_incident(tmp_path, "skip", j.dumps)]))
    assert ops[3]["status"] == "not_joined" and ops[3]["not_joined_ranks"] == [0]
    assert ops[4]["status"] == "matched"


def test_wrapped_ring_buffers_differ_between_ranks(tmp_path):
    # Each rank kept only its last N entries; rank 0 kept fewer, so its window starts later.
    j = job(n_steps=30, late={3: (1, 30 * MS), 25: (1, 30 * MS)}, subgroup=[0, 1])
    j.dumps[0]["entries"] = j.dumps[0]["entries"][-30:]   # world seq 16..30 (+ sub ops)
    j.dumps[1]["entries"] = j.dumps[1]["entries"][-44:]   # world seq 9..30
    a = analyze([make_incident(tmp_path, "wrap", j.dumps)])
    assert a["ranks"]["0"]["wrapped"] and a["ranks"]["1"]["wrapped"]
    world = ops_of(a)
    assert min(world) == 9
    # Rank 0's records of 9..15 are gone, but its pg_status shows it completed them: joined,
    # completed, not evicted-and-unknown; identity unchecked and no wait measured.
    assert {world[s]["status"] for s in range(9, 16)} == {"joined_by_counter"}
    assert {world[s]["progress"] for s in range(9, 16)} == {"completed"}
    assert world[10]["evicted_ranks"] == [] and world[10]["counter_ranks"] == [0]
    assert world[10]["states"] == {"0": "completed", "1": "completed"} and world[10]["attribution"] is None
    assert {world[s]["status"] for s in range(16, 31)} == {"matched"}
    assert a["communicators"][0]["windows"] == {"0": [16, 30], "1": [9, 30]}
    f = findings_by(a, j.steps)
    assert f[(0, 25)]["verdict"] == "attributed" and abs(f[(0, 25)]["explains_ns"] - 30 * MS) < 3 * MS
    # step 3 fell out of both buffers; step 10 only out of rank 0's: neither can be judged
    assert f[(0, 3)]["verdict"] == "unresolved" and "wrapped" in f[(0, 3)]["missing"][0]
    assert f[(1, 3)]["verdict"] == "unresolved"
    assert f[(1, 10)]["verdict"] == "unresolved" and "joined_by_counter" in f[(1, 10)]["missing"][0]
    assert f[(0, 16)]["verdict"] == "not_applicable"


def test_sequence_ids_start_late_without_wrap_flag(tmp_path):
    # FR enabled (or reset) mid-run: seq ids start at 101 on both ranks, record ids at 100.
    j = job(n_steps=5, seq_offset=100)
    a = analyze([make_incident(tmp_path, "late", j.dumps)])
    assert a["summary"]["matched"] == 5 and min(ops_of(a)) == 101


def test_p2p_ops_are_skipped_not_matched(tmp_path):
    j = job(n_steps=3)
    j.dumps[0]["entries"].append({**j.dumps[0]["entries"][-1], "profiling_name": "nccl:send 0->1", "record_id": 99,
                                  "is_p2p": True, "p2p_seq_id": 1})
    a = analyze([make_incident(tmp_path, "p2p", j.dumps)])
    assert a["summary"]["p2p_skipped"] == 1 and a["summary"]["matched"] == 3


def test_coalesced_batch_matches_by_order(tmp_path):
    j = job(n_steps=2)
    for d in j.dumps.values():
        last = d["entries"][-1]
        d["entries"] += [{**last, "record_id": 10, "collective_seq_id": 3, "profiling_name": "nccl:all_reduce"},
                         {**last, "record_id": 11, "collective_seq_id": 3, "profiling_name": "nccl:coalesced",
                          "input_sizes": [], "output_sizes": [], "input_dtypes": [], "output_dtypes": []}]
    a = analyze([make_incident(tmp_path, "coal", j.dumps)])
    three = sorted((op["sub"], op["op_type"], op["status"]) for op in a["ops"] if op["seq_id"] == 3)
    assert three == [(0, "all_reduce", "matched"), (1, "coalesced", "matched")]


def test_json_and_pickle_dumps_analyse_the_same(tmp_path):
    j = job(n_steps=6, late={2: (0, 40 * MS)})
    a = analyze([make_incident(tmp_path, "p", j.dumps)])
    b = analyze([make_incident(tmp_path, "j", j.dumps, fmt="json")])
    strip = lambda rec: [(o["seq_id"], o["status"], o["attribution"]["verdict"], o["attribution"]["late_rank"]) for o in rec["ops"]]
    assert strip(a) == strip(b)


def test_nccl_kernels_lend_gpu_times_and_kernel_only_ranks_are_unidentified(tmp_path):
    j = job(n_steps=3, with_duration=False)
    k_start = [e["time_created_ns"] + 100_000 for e in j.dumps[0]["entries"]]
    kernels = pa.table({
        "name": ["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"] * 3 + ["ampere_sgemm"],
        "device": pa.array([0] * 4, pa.int32()), "stream": [13] * 4, "correlation_id": [1, 2, 3, 4],
        "start_ns": k_start + [T0_NS], "end_ns": [s + 500_000 for s in k_start] + [T0_NS + 1],
        "rank": pa.array([0, 0, 0, 0], pa.int32())})
    inc = make_incident(tmp_path, "k", {0: j.dumps[0]}, tables={"kernels": kernels})
    a = analyze([inc])
    per = ops_of(a)[2]["per_rank"]["0"]
    assert per["gpu_start_ns"] == k_start[1] and per["gpu_duration_ns"] == 500_000
    # a rank seen only through its kernels: no communicator identity, never matched
    k1 = kernels.set_column(kernels.schema.get_field_index("rank"), "rank", pa.array([1] * 4, pa.int32()))
    only = make_incident(tmp_path, "konly", {}, tables={"kernels": k1})
    a2 = analyze([inc, only])
    assert a2["unidentified"][0]["rank"] == 1 and a2["unidentified"][0]["kernels"] == 3
    assert a2["ranks"]["1"]["kernel_only"] is True
    assert {op["status"] for op in a2["ops"]} == {"cannot_decide"}  # not "never joined": it ran NCCL kernels
    f = findings_by(a2, {1: [(0, T0_NS, T0_NS + 10 * 1000 * MS)]})
    assert f[(1, 0)]["verdict"] == "unresolved" and "only through NCCL kernels" in f[(1, 0)]["missing"][0]


def test_transport_not_observed_then_observed(tmp_path):
    j = job(n_steps=2)
    a = analyze([make_incident(tmp_path, "t0", j.dumps)])
    assert a["transport"]["transport"] == "not_observed" and "no nvlink" in a["transport"]["reason"]
    t = j.dumps[0]["entries"][0]["time_created_ns"]
    nvml = pa.table({"device": pa.array([0, 0, 0], pa.int32()), "ts_ns": [t, t + 1000, t + 2000],
                     "metric": ["nvlink_tx_bytes", "nvlink_tx_bytes", "gpu_util_pct"], "value": [1e6, 3e6, 50.0],
                     "source": ["poll"] * 3, "rank": pa.array([0, 0, 0], pa.int32())})
    b = analyze([make_incident(tmp_path, "t1", j.dumps, tables={"nvml": nvml})])
    s = b["transport"]["series"]
    assert b["transport"]["transport"] == "observed" and len(s) == 1
    assert s[0]["metric"] == "nvlink_tx_bytes" and s[0]["samples"] == 2 and s[0]["max"] == 3e6


def test_rank_in_two_incidents_is_refused(tmp_path):
    from workflow_lib.core.errors import StallcaseError

    j = job(n_steps=2)
    a = make_incident(tmp_path, "a", j.dumps)
    b = make_incident(tmp_path, "b", {1: j.dumps[1]})
    with pytest.raises(StallcaseError, match="rank 1 is also in incident"):
        analyze([a, b])


def test_no_records_at_all(tmp_path):
    inc = make_incident(tmp_path, "empty", {}, tables={"steps": pa.table({"step_id": [0], "thread_id": [1], "start_ns": [0],
                                                                          "end_ns": [10], "rank": pa.array([0], pa.int32())})})
    a = analyze([inc])
    assert a["summary"]["ops"] == 0 and a["ops"] == []
    assert findings_by(a, {0: [(0, 0, 10)]})[(0, 0)]["verdict"] == "not_applicable"


def test_rank_listed_without_collectives_is_a_missing_dump_not_a_culprit(tmp_path):
    # A recorder incident of rank 1 that traced no collectives, beside rank 0's FR dump.
    from workflow_lib.core.incident import read_incident, source, write_incident

    j = job(n_steps=3)
    a0 = make_incident(tmp_path, "fr0", {0: j.dumps[0]})
    write_incident(tmp_path / "rec1", {"incident_id": "rec1", "reason": "manual", "clock": {"host": "realtime"},
                                       "sources": {"steps": source("observed")}, "ranks": [1]}, {})
    a = analyze([a0, read_incident(tmp_path / "rec1")])
    assert {op["status"] for op in a["ops"]} == {"cannot_decide"}
    # ... but a recorder that declares collectives observed testifies that rank 1 did none
    write_incident(tmp_path / "rec2", {"incident_id": "rec2", "reason": "manual", "clock": {"host": "realtime"},
                                       "sources": {"collectives": source("observed")}, "ranks": [1]}, {})
    b = analyze([a0, read_incident(tmp_path / "rec2")])
    assert {op["status"] for op in b["ops"]} == {"not_joined"}
