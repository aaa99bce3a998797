import sys
import subprocess

import pytest

from workflow_lib.plan import build as P, rebuild as R
from workflow_lib.plan.candidate import apply_arg_changes
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.errors import MissingArtifact

from incident_factory import make_incident

DESIGN = {"blocks": 2, "runs_per_arm": 2, "control_runs": 1, "warmup_runs": 1, "seed": 7, "max_retries": 1,
          "max_failed_fraction": 0.34, "confidence": 0.95, "run_timeout_s": 60,
          "metric": {"name": "step", "source": "recorder_steps", "statistic": "median", "skip_steps": 0, "unit": "ns"}}


def _snap(tmp_path):
    inc = make_incident(tmp_path)
    rec = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    return rec, records.digest_of(rec)


def test_apply_arg_changes():
    argv = ["py", "w.py", "--a", "1", "--b=2", "--flag", "--c", "3"]
    out = apply_arg_changes(argv, {"set_args": {"--a": 5, "--b": "7", "--new": "x"}, "remove_args": ["--c", "--flag"], "append_args": ["--z"]})
    assert out == ["py", "w.py", "--a", "5", "--b=7", "--new", "x", "--z"]


def test_plan_is_valid_deterministic_and_stored(tmp_path):
    snap, d = _snap(tmp_path)
    cand = {"set_args": {"--delay-ms": "2"}}
    p1 = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate=cand)
    p2 = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate=cand)
    assert records.digest_of(p1) == records.digest_of(p2)
    digest = P.write_plan(p1, tmp_path / "plan.json", tmp_path / "results")
    from workflow_lib.core.cas import CAS

    assert CAS(tmp_path / "results").get_bytes(digest) == records.canonical_bytes(p1.to_json())
    assert p1.arms.candidate.argv[-1] == "2" and not p1.arms.candidate.same_as_baseline
    assert sorted(p1.schedule) == ["b000", "b001"]


def test_aa_plan_candidate_is_baseline(tmp_path):
    snap, d = _snap(tmp_path)
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate="baseline")
    assert p.arms.candidate.same_as_baseline and p.arms.candidate.argv == p.arms.baseline.argv


def test_patch_candidate_resolved_to_digests_and_materialized(tmp_path):
    snap, d = _snap(tmp_path)
    patch = tmp_path / "c.patch"
    patch.write_text("--- a/work.py\n+++ b/work.py\n@@ -1,2 +1,3 @@\n \n+# candidate change\n import json, os, sys, time\n")
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(patch)})
    a, b = p.arms.baseline.sources, p.arms.candidate.sources
    assert a[0].relpath == b[0].relpath == "work.py" and a[0].digest != b[0].digest
    spec = R.materialize_arm(p, "B", tmp_path / "results", tmp_path / "wB")
    assert "# candidate change" in (tmp_path / "wB" / "work.py").read_text()
    assert spec["argv"][1] == str(tmp_path / "wB" / "work.py")
    spec_a = R.materialize_arm(p, "A", tmp_path / "results", tmp_path / "wA")
    assert "# candidate change" not in (tmp_path / "wA" / "work.py").read_text()
    assert subprocess.run(spec_a["argv"], cwd=spec_a["cwd"], check=False).returncode == 0


def test_git_ref_candidate(tmp_path):
    snap, d = _snap(tmp_path)
    src = tmp_path / "src"
    run = lambda *a: subprocess.run(["git", "-C", str(src), *a], check=True, capture_output=True)
    run("init", "-q"); run("add", "work.py"); run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (src / "work.py").write_text((src / "work.py").read_text() + "\n# on a branch\n")
    run("checkout", "-qb", "cand"); run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "cand")
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"git_ref": "cand", "repo": str(src)})
    assert len(p.arms.candidate.changes["git_ref"]) == 40
    R.materialize_arm(p, "B", tmp_path / "results", tmp_path / "wB")
    assert "# on a branch" in (tmp_path / "wB" / "work.py").read_text()


def test_reconstruction_blocks_when_source_is_gone_everywhere(tmp_path):
    snap, d = _snap(tmp_path)
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate="baseline")
    src = p.arms.baseline.sources[0]
    from workflow_lib.core.cas import CAS

    CAS(tmp_path / "results").path_for(src.digest).unlink()
    (tmp_path / "src" / "work.py").unlink()
    with pytest.raises(MissingArtifact, match="role=source path=work.py"):
        R.materialize_arm(p, "A", tmp_path / "results", tmp_path / "w")


def test_manifest_env_is_refiltered_and_candidate_env_must_be_allow_listed(tmp_path):
    snap, d = _snap(tmp_path)
    snap = dict(snap, workload=dict(snap["workload"], env={"BASH_ENV": "/tmp/evil", "OMP_NUM_THREADS": "4"}))
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate="baseline")
    assert p.workload.env == {"OMP_NUM_THREADS": "4"} and p.arms.baseline.env == {"OMP_NUM_THREADS": "4"}
    from workflow_lib.core.errors import StallcaseError

    with pytest.raises(StallcaseError, match="LD_AUDIT"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"env": {"LD_AUDIT": "x"}})


def test_patch_cannot_write_outside_the_sources(tmp_path):
    snap, d = _snap(tmp_path)
    patch = tmp_path / "escape.patch"
    patch.write_text("--- /dev/null\n+++ b/../../escaped.txt\n@@ -0,0 +1 @@\n+owned\n")
    from workflow_lib.core.errors import StallcaseError

    with pytest.raises(StallcaseError, match="does not apply"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(patch)})
    assert not (tmp_path / "escaped.txt").exists()
