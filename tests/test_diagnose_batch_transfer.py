"""transfer_stall over all steps of a rank at once (check_steps) gives, step by step, what the
per-step check gives: the verdict, the claimed time, the missing evidence and the critical ns
by kind of copy that next_experiments ranks fixes by; on every fixture and on a synthetic
incident with every kind of copy (benchmarks/copies_incident.py), also without host calls."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.copies_incident import copies_incident
from tests.test_diagnose_batch import INCIDENTS, FIXTURES, _same
from tests import reference_diagnosis
from workflow_lib.core.incident import Incident, read_incident, source
from workflow_lib.diagnose import batch, columns, diagnose, lanes, measures
from workflow_lib.diagnose.evidence import RankInput
from workflow_lib.diagnose.checks import transfer_stall


def _inputs(inc, monkeypatch) -> list[batch.StepsInput]:
    """The StepsInput of each rank, as the batched diagnosis builds it."""
    got = []

    def capture(ev, frame, src, opts, m, cold, *rest, **kw):
        got.append(batch.StepsInput(frame, batch.make_base(frame, ev, opts.min_gap_ns), RankInput(ev, src, opts), cold))
        return real(ev, frame, src, opts, m, cold, *rest, **kw)

    real = columns.diagnose_rank
    monkeypatch.setattr(columns, "diagnose_rank", capture)
    diagnose(inc, incident_id="x", snapshot_digest="0" * 64, validate=False)
    monkeypatch.undo()
    return got


def _by_step(fr: batch.StepFrame, iv) -> list:
    p, k = fr.split(measures.union(iv.start_ns, iv.end_ns))
    return list(zip(k.tolist(), p.start_ns.tolist(), p.end_ns.tolist()))


def _compare(si: batch.StepsInput) -> dict:
    fast = transfer_stall.check_steps(si)
    ref = reference_diagnosis.per_step(transfer_stall, si, si.rank.ev.rank)
    assert fast.verdict.tolist() == ref.verdict.tolist()
    assert [fast.missing_of(k) for k in range(si.frame.n)] == [ref.missing_of(k) for k in range(si.frame.n)]
    assert _by_step(si.frame, fast.claimed) == _by_step(si.frame, ref.claimed)
    # The same kinds in the same order (the order the step's copies show them), with the same ns.
    assert {k: list(v.items()) for k, v in fast.kinds_ns.items()} == {k: list(v.items()) for k, v in ref.kinds_ns.items()}
    return ref.kinds_ns


@pytest.mark.parametrize("path", INCIDENTS,
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_check_steps_equals_check_on_fixture(path, monkeypatch):
    for si in _inputs(read_incident(path), monkeypatch):
        _compare(si)


def test_the_data_movement_captures_have_attributed_copies(monkeypatch):
    # The comparison above means something there: each capture has steps whose copies of its
    # kind held the critical path.
    paths = [p for p in INCIDENTS if "data-movement" in str(p) and p.parent.name.split("-")[0] in ("pageable", "dtoh_pack", "item")]
    assert len(paths) == 6  # each case in both forms (Kineto, recorder)
    for path in paths:
        kinds = {}
        for si in _inputs(read_incident(path), monkeypatch):
            for v in _compare(si).values():
                for kind, ns in v.items():
                    kinds[kind] = kinds.get(kind, 0) + ns
        case = path.parent.name.split("-")[0]
        assert kinds.get({"item": "sync_dtoh"}.get(case, case), 0) > 0, (path, kinds)


def test_every_kind_and_branch_on_a_synthetic_incident(monkeypatch):
    (si,) = _inputs(copies_incident(400), monkeypatch)
    kinds = _compare(si)
    seen = {kind for v in kinds.values() for kind, ns in v.items() if ns > 0}
    assert {"pageable", "sync_dtoh", "dtoh_pack", "sync_memset", "copy"} <= seen
    fast = transfer_stall.check_steps(si)
    verdict = fast.verdict.reshape(-1, 8)  # step % 8 is the injected copy
    assert (verdict[:, [0, 1, 2, 3, 6]] == batch.ATTRIBUTED).all()
    assert (verdict[:, 4] == batch.NOT_APPLICABLE).all()  # the side-stream prefetch nothing waited for


def _without(inc: Incident, name: str) -> Incident:
    tables = dict(inc.tables, **{name: inc.tables[name].slice(0, 0)})
    return Incident(path=inc.path, manifest=dict(inc.manifest, sources=dict(inc.manifest["sources"], **{name: source("not_observed", "left out")})),
                    tables=tables)


@pytest.mark.parametrize("left_out", ["runtime_api", "kernels"])
def test_without_host_calls_or_kernels(left_out, monkeypatch):
    (si,) = _inputs(_without(copies_incident(160), left_out), monkeypatch)
    _compare(si)


def test_the_whole_diagnosis_agrees(monkeypatch, tmp_path):
    _same(copies_incident(240), monkeypatch, tmp_path)


def test_lanes_in_chunks(monkeypatch):
    # Lanes packed in several chunks (a tiny LIMIT) give what one chunk gives.
    (si,) = _inputs(copies_incident(96), monkeypatch)
    ref = transfer_stall.check_steps(si).kinds_ns
    monkeypatch.setattr(lanes, "LIMIT", 3 * (int(si.frame.wall.max()) + 1))
    assert len(lanes.Lanes.chunks(si.frame, np.arange(10))) > 1
    assert transfer_stall.check_steps(si).kinds_ns == ref
