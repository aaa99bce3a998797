"""Hang versus straggler on 16- and 64-rank jobs in the real dump format: exact culprits, no false waits.

Each scenario is built by benchmarks/fr_builders.hang_job (a GPU error, a rank holding the GIL,
a rank that never enqueued anything, a straggler, a missing dump; full and onlyActive
dumps), imported through `stallcase import torch-fr` code and analysed. In every one the
culprit list is exactly the injected one, in collective order, and no op that some
member did not complete carries a wait.
"""

from __future__ import annotations

import pytest

from tests.collectives_helpers import analyze, make_incident
from benchmarks.fr_builders import MS, hang_job

CASES = [(n, s, p) for n in (16, 64) for s, p in
         [("gpu_error", False), ("gpu_error", True), ("gil", False), ("gil", True), ("never_enqueued", False),
          ("straggler", False), ("missing_dump", False), ("missing_dump", True)]]


def _culprits(a: dict) -> list[tuple[int, str, str, int]]:
    return [(c["rank"], c["kind"], c["comm"].split("|")[0], c["seq"]) for c in a["culprits"]]


def _no_wait_on_unfinished(a: dict) -> None:
    unfinished = [op for op in a["ops"] if op["progress"] != "completed"]
    for op in unfinished:
        att = op["attribution"]
        assert att is None or (att["verdict"] == "pending" and att["wait_ns"] == {}), op
    assert all(c["kind"] != "late" or c["seq"] not in {op["seq_id"] for op in unfinished if op["comm"] == c["comm"]}
               for c in a["culprits"])


@pytest.mark.parametrize("n_ranks,scenario,pending_only", CASES)
def test_culprits_are_exact(tmp_path, n_ranks, scenario, pending_only):
    culprit = n_ranks - 3
    h = hang_job(n_ranks, scenario, culprit, pending_only=pending_only)
    a = analyze([make_incident(tmp_path, f"{scenario}{n_ranks}", h.dumps)])
    assert _culprits(a) == h.expected
    _no_wait_on_unfinished(a)
    if h.hang_seq is None:
        assert a["hung_on"] is None and a["summary"]["pending"] == 0
        late = a["culprits"][0]
        assert abs(late["wait_ns"] - 300 * MS) < 0.1 * 300 * MS
    else:
        assert (a["hung_on"]["seq"], a["hung_on"]["culprit_ranks"]) == (h.hang_seq, [culprit])
    # Counters correct what the windows alone would say: nothing is evicted, nothing wrapped.
    assert not any(op["evicted_ranks"] for op in a["ops"])
    assert not any(r["wrapped"] for r in a["ranks"].values())
    # Dumps carry no host: every rank is its own clock domain, never compared.
    assert a["summary"]["clock_groups"] == len(h.dumps)


def test_gpu_error_pending_only_is_placed_by_counters(tmp_path):
    h = hang_job(16, "gpu_error", 5, pending_only=True)
    a = analyze([make_incident(tmp_path, "po", h.dumps)])
    op = next(o for o in a["ops"] if o["seq_id"] == h.hang_seq and o["pg_id"] == "0")
    # Only rank 5 still holds the op; every peer completed it per its pg_status.
    assert op["present_ranks"] == [5] and op["status"] == "joined_by_counter" and op["progress"] == "partial"
    assert op["states"]["5"] == "started" and {op["states"][str(r)] for r in range(16) if r != 5} == {"completed"}
    nxt = next(o for o in a["ops"] if o["seq_id"] == h.hang_seq + 1)
    assert nxt["progress"] == "pending" and nxt["attribution"]["verdict"] == "pending"


def test_two_culprits_in_two_groups_in_collective_order(tmp_path):
    h = hang_job(64, "two_groups", 61, subgroup=list(range(0, 64, 8)), second=8)
    a = analyze([make_incident(tmp_path, "two", h.dumps)])
    assert _culprits(a) == h.expected
    assert a["hung_on"]["comm"].startswith("0|") and a["hung_on"]["culprit_ranks"] == [61]
    # Two communicators, 64 ranks without hosts: that order compares clocks that cannot be compared.
    assert a["culprit_order"]["exact"] is False
    _no_wait_on_unfinished(a)


def test_gil_evidence_says_host_stall(tmp_path):
    h = hang_job(16, "gil", 2)
    c = analyze([make_incident(tmp_path, "gil", h.dumps)])["culprits"][0]
    assert "last enqueued 20" in " ".join(c["evidence"]) and "host-side stall" in " ".join(c["evidence"])
    assert c["missing"] == []


def test_empty_dump_without_counters_says_what_is_missing(tmp_path):
    h = hang_job(16, "never_enqueued", 4)
    c = analyze([make_incident(tmp_path, "ne", h.dumps)])["culprits"][0]
    assert c["kind"] == "never_joined" and "flight recorder was off" in c["missing"][0]


def test_skewed_enqueue_on_a_hung_op_is_no_wait(tmp_path):
    # Host enqueue skew of 5 ms on the op nobody completed, on one named host (comparable
    # clocks): still a hang, not a 5 ms wait (the false waits of issue 16).
    h = hang_job(16, "gpu_error", 3)
    for r, d in h.dumps.items():
        last = d["entries"][-1]
        last["time_created_ns"] += (5 * MS if r == 7 else 0)
    a = analyze([make_incident(tmp_path, "skew", h.dumps, hostname="node0")])
    op = next(o for o in a["ops"] if o["seq_id"] == h.hang_seq + 1)
    assert op["attribution"]["verdict"] == "pending" and a["summary"]["attributed"] == 0


def test_dumps_imported_with_a_hostname_share_one_clock(tmp_path):
    from benchmarks.fr_builders import write_dumps
    from workflow_lib import cli
    from workflow_lib.core.incident import read_incident

    h = hang_job(16, "straggler", 5)
    files = [str(f) for f in write_dumps(tmp_path / "d", h.dumps)]
    assert cli.main(["import", "torch-fr", *files, "--incident", "h", "--incidents-dir", str(tmp_path / "i"),
                     "--hostname", "node7"]) == 0
    a = analyze([read_incident(tmp_path / "i" / "h")])
    assert a["summary"]["clock_groups"] == 1
    assert {d["how"] for d in a["clock_domains"]} == {"reference", "same_clock"}
    assert {d["hostname"] for d in a["clock_domains"]} == {"node7"}
