"""The diagnosis's fast paths give the same answers as the paths they stand in for.

- measures: interval sets up to measures.SMALL boundary points run on Python ints; with SMALL = 0
  every call takes the NumPy path. Both must agree on random sets and on whole diagnoses.
- records: a diagnosis with more than records.SAMPLE_ABOVE steps is validated on a sample plus
  a shape check of every step; a fault in a sampled step or a step of another shape is refused.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from benchmarks.big_incident import big_incident
from workflow_lib.core import records
from workflow_lib.diagnose import diagnose, measures
from workflow_lib.diagnose.types import Intervals
from workflow_lib.core.errors import RecordError
from workflow_lib.core.incident import read_incident
from workflow_lib.snapshot.build import snapshot_digest
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def _raw(rng: random.Random, n: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([rng.randrange(0, 60) for _ in range(n)], np.int64)
    return s, s + np.array([rng.randrange(0, 12) for _ in range(n)], np.int64)


def _eq(a: Intervals, b: Intervals) -> bool:
    return a.start_ns.dtype == b.start_ns.dtype == np.int64 and np.array_equal(a.start_ns, b.start_ns) and np.array_equal(a.end_ns, b.end_ns)


def _both(monkeypatch, fn):
    fast = fn()
    monkeypatch.setattr(measures, "SMALL", 0)
    slow = fn()
    monkeypatch.setattr(measures, "SMALL", 48)
    return fast, slow


def test_small_interval_paths_match_numpy(monkeypatch):
    rng = random.Random(14)
    for _ in range(400):
        sa, ea = _raw(rng, rng.randrange(0, 9))
        sb, eb = _raw(rng, rng.randrange(0, 9))
        for fn in (lambda: measures.union(sa, ea),
                   lambda: measures.union_many(measures.union(sa, ea), Intervals(sb, np.maximum(sb, eb))),
                   lambda: measures.subtract(measures.union(sa, ea), measures.union(sb, eb)),
                   lambda: measures.intersect(measures.union(sa, ea), measures.union(sb, eb)),
                   # raw (overlapping, touching) inputs too: the sweep counts, it does not assume disjoint
                   lambda: measures.subtract(Intervals(sa, ea), Intervals(sb, eb)),
                   lambda: measures.intersect(Intervals(sa, ea), Intervals(sb, eb)),
                   lambda: measures.gaps(measures.union(sa, ea), 5, 50)):
            fast, slow = _both(monkeypatch, fn)
            assert _eq(fast, slow), (sa, ea, sb, eb, fast, slow)


@pytest.mark.parametrize("case", ["h200/incidents/demo", "capture/host-gap-kineto", "big-kernels", "big-host-only"])
def test_diagnosis_identical_on_both_paths(monkeypatch, case):
    def run():
        if case.startswith("big"):
            inc, dg = big_incident(40, with_kernels=case == "big-kernels"), "0" * 64
        else:
            inc = read_incident(FIXTURES / case)
            dg = snapshot_digest(FIXTURES / case, inc.manifest)
        return records.canonical_bytes(diagnose(inc, incident_id="x", snapshot_digest=dg))

    fast, slow = _both(monkeypatch, run)
    assert fast == slow


@pytest.fixture
def many_steps(monkeypatch):
    # Smaller sample constants keep the test fast; the rule is the same at any size.
    monkeypatch.setattr(records, "SAMPLE_ABOVE", 50)
    monkeypatch.setattr(records, "SAMPLE_EDGE", 10)
    monkeypatch.setattr(records, "SAMPLE_SPREAD", 10)
    rec = diagnose(big_incident(30, with_kernels=False), incident_id="x", snapshot_digest="0" * 64)
    n = 400
    rec["steps"] = [rec["steps"][5 + i % 20] for i in range(n)]  # shared dicts: cheap, valid
    return rec


def test_many_steps_validate(many_steps):
    records.validate(many_steps, "diagnosis")


def test_fault_in_sampled_step_is_refused_at_its_index(many_steps):
    rec = dict(many_steps, steps=list(many_steps["steps"]))
    i = len(rec["steps"]) - 3  # in the sampled tail
    rec["steps"][i] = dict(rec["steps"][i], wall_ns="slow")
    with pytest.raises(RecordError, match=f"steps/{i}/wall_ns"):
        records.validate(rec, "diagnosis")


def test_step_of_another_shape_is_refused_outside_the_sample(many_steps):
    rec = dict(many_steps, steps=list(many_steps["steps"]))
    _, idx = records._sampled("diagnosis", rec)
    i = next(k for k in range(len(rec["steps"])) if k not in set(idx))
    bad = dict(rec["steps"][i])
    del bad["gaps"]
    rec["steps"][i] = bad
    with pytest.raises(RecordError, match=f"steps/{i}: fields differ"):
        records.validate(rec, "diagnosis")
    rec["steps"][i] = 7
    with pytest.raises(RecordError, match=f"steps/{i}: not an object"):
        records.validate(rec, "diagnosis")
