"""Pin what runs: a multi-module program's whole source is pinned and rebuilt with its layout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workflow_lib.plan import build as P, rebuild as R
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.capture import provenance
from workflow_lib.core.errors import StallcaseError

from program_factory import TRACKED, make_program, record
from test_plan import DESIGN


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("prog")
    repo = make_program(root)
    inc = record(repo, root / "incidents", "--steps", "4")
    snap = snapshot.ingest(inc, root / "results", root / "results" / "snapshot.json")
    return root, repo, snap


def test_every_imported_module_and_tracked_file_is_pinned(recorded):
    root, repo, snap = recorded
    rels = sorted(a["relpath"] for a in snap["artifacts"] if a["role"] == "source")
    # tracked files (imported or not) plus the untracked module the program imported
    assert rels == sorted([*TRACKED, "helper_untracked.py"])
    pinned = snap["provenance"]["source"]["pinned"]
    assert pinned["capped"] is False and pinned["pinned_files"] == len(rels) and pinned["tracked_files"] == len(TRACKED)
    assert snap["provenance"]["source"]["root"] == str(repo)


def test_rebuilt_tree_runs_from_the_mapped_cwd(recorded, tmp_path):
    root, repo, snap = recorded
    plan = P.build_plan(snap, records.digest_of(snap), root / "results", design=DESIGN, candidate="baseline")
    spec = R.materialize_arm(plan, "A", root / "results", tmp_path / "wA")
    assert spec["cwd"] == str(tmp_path / "wA" / "runs")
    for rel in [*TRACKED, "helper_untracked.py"]:
        assert (tmp_path / "wA" / rel).read_bytes() == (repo / rel).read_bytes()
    # The original tree is gone: only the rebuilt copy can satisfy the imports.
    moved = repo.with_name("proj-moved")
    repo.rename(moved)
    try:
        env = {"PATH": "/usr/bin:/bin", "STALLCASE_RECORDER": "off", "PYTHONPATH": str(Path(P.__file__).parents[1])}
        out = subprocess.run(spec["argv"], cwd=spec["cwd"], env=env, capture_output=True, text=True, timeout=60)
    finally:
        moved.rename(repo)
    assert out.returncode == 0, out.stderr
    assert "baseline-config" in out.stdout


def test_patch_applies_to_any_file_of_the_tree(recorded, tmp_path):
    root, repo, snap = recorded
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/conf/setup.txt\n+++ b/conf/setup.txt\n@@ -1 +1 @@\n-baseline-config\n+candidate-config\n")
    plan = P.build_plan(snap, records.digest_of(snap), root / "results", design=DESIGN, candidate={"patch": str(patch)})
    spec = R.materialize_arm(plan, "B", root / "results", tmp_path / "wB")
    assert (tmp_path / "wB" / "conf" / "setup.txt").read_text() == "candidate-config\n"
    assert (tmp_path / "wB" / "pkg" / "model_def.py").is_file()


def test_past_the_cap_only_imported_modules_are_pinned_with_one_line(tmp_path, monkeypatch):
    repo = make_program(tmp_path)
    (repo / "big.bin").write_bytes(b"\0" * (3 << 20))
    subprocess.run(["git", "-C", str(repo), "add", "big.bin"], check=True)
    monkeypatch.setenv(provenance.SOURCE_CAP_ENV, "1")
    errors: list[str] = []
    files, summary = provenance.source_files(repo, str(repo / "train.py"), False, errors)
    assert summary["capped"] is True and [Path(f).name for f in files] == ["train.py"]
    assert len(errors) == 1 and "over the cap of 1 MiB" in errors[0] and "STALLCASE_SOURCE_CAP_MB" in errors[0]


def test_installed_code_inside_the_tree_is_not_source(tmp_path):
    repo = make_program(tmp_path)
    site = repo / ".venv" / "lib" / "site-packages" / "dep"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    import importlib.util, sys

    spec = importlib.util.spec_from_file_location("dep_inside_tree", site / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["dep_inside_tree"] = mod
    try:
        assert provenance.imported_modules(repo) == []
    finally:
        del sys.modules["dep_inside_tree"]


@pytest.mark.parametrize("candidate", [
    {"set_args": {"--steps": "4"}},        # already the recorded value
    {"env": {}},
    {"remove_args": ["--not-there"]},
])
def test_a_candidate_that_changes_nothing_is_refused(recorded, candidate):
    root, repo, snap = recorded
    with pytest.raises(StallcaseError, match="changes nothing.*candidate=baseline"):
        P.build_plan(snap, records.digest_of(snap), root / "results", design=DESIGN, candidate=candidate)
    assert P.build_plan(snap, records.digest_of(snap), root / "results", design=DESIGN,
                        candidate="baseline").arms.candidate.same_as_baseline


def test_a_declared_root_inside_a_monorepo_pins_that_project_and_git_ref_reads_its_subtree(tmp_path):
    from program_factory import git

    mono = tmp_path / "mono"
    mono.mkdir()
    proj = make_program(mono, init=False)
    (mono / "other").mkdir()
    (mono / "other" / "unrelated.py").write_text("x = 1\n")
    git(mono, "init", "-q")
    git(mono, "add", "other", *[f"proj/{t}" for t in TRACKED])
    git(mono, "commit", "-qm", "base")
    inc = record(proj, tmp_path / "incidents", "--steps", "3", env_extra={provenance.SOURCE_ROOT_ENV: str(proj)})
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    rels = sorted(a["relpath"] for a in snap["artifacts"] if a["role"] == "source")
    assert rels == sorted([*TRACKED, "helper_untracked.py"])
    assert snap["provenance"]["source"]["prefix"] == "proj/"
    git(mono, "checkout", "-qb", "fix")
    (proj / "loader.py").write_text((proj / "loader.py").read_text() + "# fixed\n")
    git(mono, "commit", "-qam", "fix loader")
    plan = P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN,
                        candidate={"git_ref": "fix", "repo": str(mono)})
    a = {s.relpath: s.digest for s in plan.arms.baseline.sources}
    b = {s.relpath: s.digest for s in plan.arms.candidate.sources}
    assert set(a) == set(b) and [r for r in a if a[r] != b[r]] == ["loader.py"]
