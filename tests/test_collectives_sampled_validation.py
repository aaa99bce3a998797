"""A collectives record's `ops` (one item per collective operation, each with every rank's
state: 27 MB for 64 ranks x 2,002 ops) is validated like a diagnosis's steps above
records.SAMPLE_ABOVE items: a sample against the full schema plus a shape check of every op.
A fault in a sampled op is refused at its index; an op of another shape anywhere is refused."""

from __future__ import annotations

import pytest

from workflow_lib.core import records
from workflow_lib.collectives import analyze_collectives
from workflow_lib.core.errors import RecordError
from workflow_lib.importers.torch_fr import import_torch_fr
from workflow_lib.core.incident import read_incident

from benchmarks.fr_builders import hang_job, write_dumps


@pytest.fixture(scope="module")
def many_ops(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("many-ops")
    h = hang_job(4, "gpu_error", 2, n_steps=1100)
    out = import_torch_fr(write_dumps(tmp / "dumps", h.dumps), incident_id="ops", incidents_dir=tmp / "incidents")
    rec = analyze_collectives([read_incident(out)])
    assert len(rec["ops"]) > records.SAMPLE_ABOVE
    return rec


def test_many_ops_validate_on_a_sample(many_ops):
    records.validate(many_ops, "collectives")
    _, idx = records._sampled("collectives", many_ops)
    assert idx is not None and len(idx) < len(many_ops["ops"])


def test_fault_in_a_sampled_op_is_refused_at_its_index(many_ops):
    rec = dict(many_ops, ops=list(many_ops["ops"]))
    i = len(rec["ops"]) - 2  # in the sampled tail
    rec["ops"][i] = dict(rec["ops"][i], states="everyone")
    with pytest.raises(RecordError, match=f"ops/{i}/states"):
        records.validate(rec, "collectives")


def test_op_of_another_shape_is_refused_outside_the_sample(many_ops):
    rec = dict(many_ops, ops=list(many_ops["ops"]))
    _, idx = records._sampled("collectives", rec)
    i = next(k for k in range(len(rec["ops"])) if k not in set(idx))
    bad = dict(rec["ops"][i])
    bad.pop(next(iter(bad)))
    rec["ops"][i] = bad
    with pytest.raises(RecordError, match=f"ops/{i}: fields differ"):
        records.validate(rec, "collectives")
