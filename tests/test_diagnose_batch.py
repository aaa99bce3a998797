"""The batched diagnosis (all steps of a rank at once: diagnose/batch.py, columns.py) gives
what the per-step path gives: the same verdict, explains_ns and missing evidence for every
check of every step, the same measures, gaps and excess, the same summary and next
experiments, on every incident committed under tests/fixtures and on synthetic ones.
Only the evidence differs: kept in full for the warm-up, slow and matched-collective steps."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from benchmarks.big_incident import big_incident
from tests import reference_diagnosis
from tests.diagnose_crosscheck import assert_same
from workflow_lib.core.incident import read_incident
from workflow_lib.diagnose import columns, diagnose, load_diagnosis, measures
from workflow_lib.diagnose.spool import StepSpool, write_spooled
from workflow_lib.diagnose.batch import StepFrame
from workflow_lib.diagnose.types import Intervals

FIXTURES = Path(__file__).parent / "fixtures"
INCIDENTS = sorted({p.parent for p in FIXTURES.rglob("manifest.json")})


def _same(inc, monkeypatch, tmp) -> None:
    a = reference_diagnosis.diagnose(inc, incident_id="x", snapshot_digest="0" * 64)
    ranks = []
    real = columns.diagnose_rank
    monkeypatch.setattr(columns, "diagnose_rank", lambda ev, *a, **k: ranks.append(ev.rank) or real(ev, *a, **k))
    b = diagnose(inc, incident_id="x", snapshot_digest="0" * 64, validate=True)
    assert len(ranks) == len({s["rank"] for s in b["steps"]})  # every rank went through the batched path
    assert_same(a, b)
    # Written: the tables made straight from the columns (columns.tables, in chunks of 7 steps
    # here) read back as the in-memory steps, evidence null where not kept.
    monkeypatch.setattr(columns, "CHUNK_STEPS", 7)
    out = tmp / "d.json"
    with StepSpool(out) as spool:
        rec = diagnose(inc, incident_id="x", snapshot_digest="0" * 64, validate=False, spool=spool)
        write_spooled(out, rec, spool)
    got = load_diagnosis(out)
    assert got.steps() == b["steps"]
    assert {k: v for k, v in got.record.items() if k not in ("schema_version", "step_tables")} == \
        {k: v for k, v in b.items() if k not in ("schema_version", "steps")}


def test_fixtures_are_found():
    assert len(INCIDENTS) >= 20


@pytest.mark.parametrize("path", INCIDENTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_batched_equals_per_step_on_fixture(path, monkeypatch, tmp_path):
    _same(read_incident(path), monkeypatch, tmp_path)


@pytest.mark.parametrize("kernels,host", [(True, True), (False, True), (True, False)])
def test_batched_equals_per_step_on_synthetic(kernels, host, monkeypatch, tmp_path):
    _same(big_incident(700, with_kernels=kernels, with_host=host), monkeypatch, tmp_path)


def _per_step_pieces(iv: Intervals, starts, ends):
    out = []
    for k, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist())):
        c = measures.clip(iv, lo, hi)
        out += [(k, int(a), int(b)) for a, b in zip(c.start_ns, c.end_ns)]
    return out


def test_split_is_per_step_clipping():
    rng = random.Random(7)
    for _ in range(200):
        edges = np.cumsum([rng.randint(0, 30) for _ in range(2 * rng.randint(1, 8))]).astype(np.int64)
        starts, ends = edges[0::2], edges[1::2]  # disjoint, some adjacent, some empty
        raw = [(rng.randint(-5, 200), rng.randint(0, 40)) for _ in range(rng.randint(0, 12))]
        iv = measures.union(np.array([s for s, _ in raw], np.int64), np.array([s + d for s, d in raw], np.int64))
        frame = StepFrame(np.arange(starts.size), np.zeros(starts.size, np.int64), starts, ends)
        p, k = frame.split(iv)
        assert [(int(a), int(b), int(c)) for a, b, c in zip(k, p.start_ns, p.end_ns)] == _per_step_pieces(iv, starts, ends)
        assert frame.per_step(iv).tolist() == [measures.clip(iv, lo, hi).total_ns for lo, hi in zip(starts, ends)]


def test_overlapping_steps_are_not_a_frame():
    assert StepFrame.disjoint(np.array([0, 10]), np.array([10, 20]))
    assert not StepFrame.disjoint(np.array([0, 5]), np.array([10, 20]))


@pytest.mark.parametrize("seed", range(40))
def test_batched_equals_per_step_on_random_incidents(seed, monkeypatch, tmp_path):
    from tests.random_incident import random_incident

    _same(random_incident(seed), monkeypatch, tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_overlapping_steps_equal_per_step(seed, monkeypatch, tmp_path):
    """Steps that overlap (a second thread's steps straddling the first's, one step nested in
    another) are diagnosed in groups of disjoint steps (columns.disjoint_groups), each group all
    at once: the same as the per-step reference, which reads each step on its own."""
    import dataclasses

    import pyarrow as pa

    from tests.random_incident import random_incident

    inc = random_incident(seed)
    st = inc.table("steps")
    s, e = st["start_ns"].to_numpy(), st["end_ns"].to_numpy()
    extra = {"step_id": st["step_id"].to_pylist() + list(range(100, 100 + s.size // 2)) + [999],
             "thread_id": st["thread_id"].to_pylist() + [2] * (s.size // 2) + [3],
             "start_ns": s.tolist() + ((s[: s.size // 2] + e[: s.size // 2]) // 2).tolist() + [int(s[3]) + 1],
             "end_ns": e.tolist() + (e[1: s.size // 2 + 1]).tolist() + [int(e[3]) - 1]}
    for name in st.schema.names:  # the other columns (rank, role, items, tokens): null
        extra.setdefault(name, [None] * len(extra["step_id"]))
    steps = pa.Table.from_pydict(extra, schema=st.schema)
    inc = dataclasses.replace(inc, tables=dict(inc.tables, steps=steps))
    groups = columns.disjoint_groups(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy())
    assert len(groups) >= 2 and sorted(np.concatenate(groups).tolist()) == list(range(steps.num_rows))
    _same(inc, monkeypatch, tmp_path)
