"""Real flight-recorder dumps of a hang, made on one H200 (tests/fixtures/h200_fr_hang, PROVENANCE.md).

A group of one whose sixth all_reduce waits on the device behind a spin kernel: dumps
taken with `_dump_nccl_trace()` after the completed ops, while the op was pending (full
and onlyActive, pickle and JSON), and by the watchdog on its timeout. What only a
multi-rank job shows (never_joined, stuck_on_device next to completed peers, a missing
dump) is built synthetically in test_collectives_hangs.py: NCCL refuses two ranks on one GPU.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.collectives_helpers import analyze
from workflow_lib.capture.sources import collectives as C
from workflow_lib.importers.torch_fr import import_torch_fr
from workflow_lib.core.incident import read_incident

FIX = Path(__file__).parent / "fixtures" / "h200_fr_hang"


def _import(tmp_path: Path, name: str) -> dict:
    d = tmp_path / name
    d.mkdir()
    f = d / "nccl_trace_rank_0"
    shutil.copy(FIX / name, f)
    inc = read_incident(import_torch_fr([f], incident_id=name.replace(".", "_"), incidents_dir=tmp_path / "inc"))
    return inc


@pytest.mark.parametrize("name", ["solo_pending.pkl", "timeout_rank_0", "solo_pending_only.pkl", "solo_pending_only.json"])
def test_pending_op_is_a_hang_not_a_wait(tmp_path, name):
    inc = _import(tmp_path, name)
    d = inc.manifest["sources"]["torch_fr"]["detail"]
    assert (d["nccl_version"], d["dump_version"]) == ("2.28.9", "2.10")
    rank = d["dumps"]["0"]
    assert rank["groups"]["0"]["last_enqueued"] == 6 and rank["groups"]["0"]["last_completed"] == 5
    assert rank["groups"]["0"]["last_started"] == 5 and rank["wrapped"] is False
    a = analyze([inc])
    op6 = next(o for o in a["ops"] if o["pg_id"] == "0" and o["seq_id"] == 6)
    assert op6["progress"] == "pending" and op6["states"] == {"0": "scheduled"}
    assert op6["attribution"]["verdict"] == "pending" and op6["attribution"]["wait_ns"] == {}
    # The only member enqueued it and nobody completed it: the job hung there, no rank is singled out.
    assert (a["hung_on"]["seq"], a["hung_on"]["culprit_ranks"], a["culprits"]) == (6, [], [])


def test_pending_only_dump_is_not_wrapped(tmp_path):
    inc = _import(tmp_path, "solo_pending_only.pkl")
    rank = inc.manifest["sources"]["torch_fr"]["detail"]["dumps"]["0"]
    assert rank["first_record_id"] == 6 and rank["pending_only"] is True and rank["wrapped"] is False
    # The sub-group has no entry left: its counters are mapped by name, and say so.
    assert rank["groups"]["1"] == {"pg_id": 1, "last_enqueued": 1, "last_started": 1, "last_completed": 1, "mapped_by": "name"}


def test_pickle_and_json_dumps_agree(tmp_path):
    a = _import(tmp_path, "solo_completed.pkl").manifest["sources"]["torch_fr"]["detail"]["dumps"]["0"]
    b = _import(tmp_path, "solo_completed.json").manifest["sources"]["torch_fr"]["detail"]["dumps"]["0"]
    assert a["groups"] == b["groups"] and a["entries"] == b["entries"] == 6


def test_completed_dump_has_no_hang(tmp_path):
    a = analyze([_import(tmp_path, "solo_completed.pkl")])
    assert a["hung_on"] is None and a["culprits"] == []
    assert {op["progress"] for op in a["ops"]} == {"completed"}


class _Dist:
    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_rank(self):
        return 0


def test_recorder_source_keeps_versions_and_counters(monkeypatch):
    # The recorder reads the same dump in process (torch substituted: no GPU here).
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    data = (FIX / "solo_pending.pkl").read_bytes()
    table, src = C.collect(0, 0, dist=_Dist(), dumper=lambda: data)
    assert table.num_rows == 7 and src["status"] == "observed"
    assert (src["detail"]["nccl_version"], src["detail"]["dump_version"]) == ("2.28.9", "2.10")
    assert src["detail"]["dumps"]["0"]["groups"]["0"]["last_enqueued"] == 6
