"""The diagnosis reads a job: in a synchronous job the rank the others wait for inside the
collective is named with its own cause and the others get collective wait, not host work;
a consumer's queue wait is linked to the producers' spans during it, and the next
experiment names the lever on the other side."""

from __future__ import annotations

import pytest
from builders import make_incident, span, step

from tests import reference_diagnosis
from workflow_lib.diagnose import DiagnoseOptions, diagnose

MS = 1_000_000


def _sync_job(slow=2, extra=40 * MS, steps=6, tail=lambda s: MS):
    """3 ranks; per step each does 5 ms forward, rank `slow` 40 ms more augment, then all_reduce
    until the last arrival + `tail(step)` (1 ms)."""
    st, sp = [], []
    t = 0
    for s in range(steps):
        arrive = {r: t + 5 * MS + (extra if r == slow else 0) for r in range(3)}
        end = max(arrive.values()) + tail(s)
        for r in range(3):
            st.append(step(s, t, end, rank=r))
            sp.append(span("forward", t, t + 5 * MS, rank=r))
            if r == slow:
                sp.append(span("augment", t + 5 * MS, arrive[r], rank=r))
            sp.append(span("all_reduce", arrive[r], end, rank=r))
        t = end
    return make_incident(steps=st, spans=sp)


def test_the_late_rank_is_named_with_its_own_cause_and_the_others_wait_in_the_collective():
    d = diagnose(_sync_job(), incident_id="sync", snapshot_digest="0" * 64)
    job = d["summary"]["job"]
    assert job["slowest_rank"] == 2 and job["slowest_rank_steps"]["2"] == 6
    assert job["slowest_rank_cause"]["check"] == "host_work" and job["slowest_rank_cause"]["spans"][0] == "augment"
    assert job["waited_for_slowest"] == [0, 1]
    assert job["collective_wait_ns_by_rank"] == {"0": 6 * 40 * MS, "1": 6 * 40 * MS, "2": 0}
    for rec in d["steps"]:
        by = {f["check"]: f for f in rec["findings"]}
        if rec["rank"] != 2:
            assert by["collective_wait"]["explains_ns"] == 40 * MS
            assert by["collective_wait"]["evidence"]["waited_for_ranks"] == [2]
            assert by["host_work"]["explains_ns"] <= 6 * MS  # forward and the 1 ms all_reduce tail, never the wait
        else:
            assert by["collective_wait"]["explains_ns"] == 0
    top = d["next_experiments"][0]
    assert top["check"] == "host_work" and "on rank 2" in top["candidate_change"] and "augment" in top["candidate_change"]


@pytest.mark.parametrize("diagnose", [reference_diagnosis.diagnose, diagnose], ids=["reference", "engine"])
def test_a_rank_slow_on_every_step_is_read_against_its_peers_not_its_own_typical_step(diagnose):
    # Rank 2's augment is 40 ms every step, so its steps are no slower than its own typical step;
    # what varies from step to step is the all-reduce's tail (1 or 9 ms, every rank). Read
    # against itself, rank 2's excess lies in all_reduce (as a CI run of the torchrun test
    # found); read against ranks 0 and 1, it spends 40 ms a step more in augment.
    d = diagnose(_sync_job(steps=12, tail=lambda s: 9 * MS if s % 3 == 2 else MS), incident_id="sync",
                 snapshot_digest="0" * 64)
    cause = d["summary"]["job"]["slowest_rank_cause"]
    assert d["summary"]["job"]["slowest_rank"] == 2
    assert cause["spans"] == ["augment"], cause
    assert cause["span_ns_per_step_over_peers"] == {"augment": 40 * MS}


def test_peers_are_the_ranks_of_the_slowest_ranks_role():
    st, sp = [], []
    for s in range(6):  # a consumer (rank 0) and two producers; producer 2 packs 10 ms more, its steps are longest
        t = s * 40 * MS
        st += [step(s, t, t + 30 * MS, rank=0), step(s, t, t + 30 * MS, rank=1), step(s, t, t + 35 * MS, rank=2)]
        sp += [span("queue_get", t, t + 25 * MS, rank=0), span("forward", t + 25 * MS, t + 30 * MS, rank=0),
               span("pack", t, t + 15 * MS, rank=1), span("pack", t, t + 25 * MS, rank=2)]
    inc = make_incident(steps=st, spans=sp)
    inc.manifest["job"] = {"id": "x", "id_from": "derived", "roles": {"0": "consumer", "1": "producer", "2": "producer"}}
    job = diagnose(inc, incident_id="pc", snapshot_digest="0" * 64)["summary"]["job"]
    assert job["slowest_rank"] == 2
    # Read against producer 1 only: the consumer's forward and queue_get are no producer's work.
    assert job["slowest_rank_cause"]["span_ns_per_step_over_peers"] == {"pack": 10 * MS}


def test_no_slow_rank_no_collective_wait():
    d = diagnose(_sync_job(extra=0), incident_id="even", snapshot_digest="0" * 64)
    assert d["summary"]["job"]["waited_for_slowest"] == []
    assert d["summary"]["by_check"]["collective_wait"]["explains_ns"] == 0


def test_a_consumers_queue_wait_names_the_producers_and_the_lever():
    st, sp = [], []
    for s in range(5):  # the producer (rank 1) packs 10 ms per item; the consumer (rank 0) waits for it
        t = s * 10 * MS
        st += [step(s, t, t + 10 * MS, rank=0), step(s, t, t + 10 * MS, rank=1)]
        sp += [span("queue_get", t, t + 8 * MS, rank=0), span("forward", t + 8 * MS, t + 10 * MS, rank=0),
               span("pack", t, t + 10 * MS, rank=1)]
    inc = make_incident(steps=st, spans=sp)
    inc.manifest["job"] = {"id": "x", "id_from": "derived", "roles": {"0": "consumer", "1": "producer"}}
    d = diagnose(inc, incident_id="pc", snapshot_digest="0" * 64, options=DiagnoseOptions())
    (w,) = d["summary"]["job"]["queue_waits"]
    assert (w["rank"], w["wait_ns"], w["overlapped_producer_spans"]) == (0, 40 * MS, {"1": {"pack": 40 * MS}})
    lever = next(e for e in d["next_experiments"] if e["check"] == "input_starvation")
    assert lever["candidate_change"].startswith("more producers, or a lower min-ready")
    assert "producer rank(s) 1 in pack" in lever["candidate_change"]
    assert lever["recoverable_upper_bound_ns"] == 40 * MS
