"""Environment truth: the node's own GPU, preload and paths reach a trial; the workload's
Python distributions are pinned at capture and preflight blocks on a change, naming it."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import pytest

from workflow_lib.plan import build as P
from workflow_lib.preflight import check as PF
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.trials import block as trials

from incident_factory import make_incident
from test_plan import DESIGN

from workflow_lib.plan.types import Design

NODE_OWNED = {"CUDA_VISIBLE_DEVICES": "3", "LD_PRELOAD": "", "LD_LIBRARY_PATH": "/node/lib", "PYTHONPATH": "/node/py"}
HOSTILE = {"CUDA_VISIBLE_DEVICES": "0", "LD_PRELOAD": "/tmp/evil.so", "LD_LIBRARY_PATH": "/evil/lib",
           "PYTHONPATH": "/evil/py", "OMP_NUM_THREADS": "2"}


def _hostile_snapshot(tmp_path):
    inc = make_incident(tmp_path)
    m = json.loads((inc / "manifest.json").read_text())
    m["workload"]["env"] = dict(HOSTILE)
    (inc / "manifest.json").write_text(json.dumps(m))
    return snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")


def test_a_hostile_manifests_preload_never_reaches_the_plan(tmp_path):
    snap = _hostile_snapshot(tmp_path)
    plan = P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN, candidate="baseline")
    assert plan.workload.env == {"OMP_NUM_THREADS": "2"}
    assert plan.arms.baseline.env == plan.arms.candidate.env == {"OMP_NUM_THREADS": "2"}
    with pytest.raises(Exception, match="CUDA_VISIBLE_DEVICES: the node's own"):
        P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN,
                     candidate={"env": {"CUDA_VISIBLE_DEVICES": "1"}})


def test_a_trial_run_gets_the_nodes_own_values_even_from_a_hand_edited_plan(tmp_path, monkeypatch):
    for k, v in NODE_OWNED.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "env.json"
    code = ("import json, os\n"
            f"json.dump({{k: os.environ.get(k) for k in {sorted(HOSTILE)!r}}}, open({str(out)!r}, 'w'))\n"
            "json.dump({'schema_version': 1, 'steps_ns': [1, 2], 'unusual': []}, open(os.environ['STALLCASE_STEPS_OUT'], 'w'))\n")
    spec = {"argv": [sys.executable, "-c", code], "cwd": str(tmp_path), "env": dict(HOSTILE)}
    run = trials.one_run(spec, Design.from_json(DESIGN), {"index": 0, "arm": "A"}, 0, None)
    assert run.status == "ok", run.error
    seen = json.loads(out.read_text())
    assert seen == {**NODE_OWNED, "OMP_NUM_THREADS": "2"}


def _plan_with(tmp_path, dists):
    inc = make_incident(tmp_path)
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    snap = dict(snap, provenance=dict(snap["provenance"], imported_distributions=dists))
    return P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN, candidate="baseline")


def _pf(tmp_path, plan):
    return PF.preflight(plan, records.digest_of(plan), "b000", tmp_path / "results", results_dir=tmp_path / "results")


def test_preflight_passes_when_the_imported_distributions_are_unchanged(tmp_path):
    plan = _plan_with(tmp_path, {"numpy": metadata.version("numpy"), "pyarrow": metadata.version("pyarrow")})
    rec = _pf(tmp_path, plan)
    assert not [d for d in rec["differences"] if d["field"].startswith("python.")]


def test_preflight_blocks_on_a_changed_or_missing_distribution_naming_it(tmp_path):
    plan = _plan_with(tmp_path, {"numpy": "0.0.1", "pyarrow": metadata.version("pyarrow"), "not-a-real-dist-xyz": "1.0"})
    rec = _pf(tmp_path, plan)
    assert rec["status"] == "blocked"
    diffs = {d["field"]: d for d in rec["differences"] if d["field"].startswith("python.")}
    assert sorted(diffs) == ["python.distribution:not-a-real-dist-xyz", "python.distribution:numpy"]
    assert diffs["python.distribution:numpy"]["observed"] == metadata.version("numpy")
    assert diffs["python.distribution:not-a-real-dist-xyz"]["observed"] == "not installed"
    assert "python.distribution:numpy: planned '0.0.1'" in PF.readable_diff(rec)
    records.validate(rec, "preflight")


def test_versions_are_read_in_the_workloads_own_interpreter(tmp_path):
    """Another interpreter (here a wrapper, so its path differs from ours) is asked, not this process."""
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    seen = PF.observed_distributions(str(wrapper), ["numpy", "not-a-real-dist-xyz"], {"PATH": "/usr/bin:/bin"})
    assert seen == {"numpy": metadata.version("numpy"), "not-a-real-dist-xyz": None}
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho nope >&2\nexit 4\n")
    broken.chmod(0o755)
    with pytest.raises(OSError, match="nope"):
        PF.observed_distributions(str(broken), ["numpy"], {})


def test_the_recorder_pins_the_distributions_the_program_imported(tmp_path):
    from program_factory import make_program, record

    repo = make_program(tmp_path)
    inc = record(repo, tmp_path / "incidents")
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    dists = snap["provenance"]["imported_distributions"]
    assert dists["numpy"] == metadata.version("numpy") and dists["pyarrow"] == metadata.version("pyarrow")
    assert "pytest" not in dists  # imported by this test process, not by the program
    plan = P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN, candidate="baseline")
    assert plan.python_distributions == dists
