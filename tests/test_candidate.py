"""Candidate mechanics: argument edits, patches and git refs, and the plan escapes they closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.plan import candidate as C, build as P, rebuild as R
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.cas import CAS
from workflow_lib.core.errors import StallcaseError

from incident_factory import make_incident
from test_plan import DESIGN


@pytest.mark.parametrize("argv,changes,expected", [
    # the case: a bare flag followed by another flag never swallows its neighbour
    (["--amp", "--steps", "30"], {"set_args": {"--amp": 0}}, ["--amp=0", "--steps", "30"]),
    (["--amp", "--steps", "30"], {"set_args": {"--amp": False}}, ["--steps", "30"]),
    (["--amp", "--steps", "30"], {"set_args": {"--amp": None}}, ["--steps", "30"]),
    (["--steps", "30"], {"set_args": {"--amp": True}}, ["--steps", "30", "--amp"]),
    (["--amp", "--steps", "30"], {"set_args": {"--amp": True}}, ["--amp", "--steps", "30"]),
    (["--amp=1", "--steps", "30"], {"set_args": {"--amp": True}}, ["--amp", "--steps", "30"]),
    (["--steps", "30", "data.txt"], {"set_args": {"--steps": 8}}, ["--steps", "8", "data.txt"]),
    (["--steps=30", "data.txt"], {"set_args": {"--steps": "8"}}, ["--steps=8", "data.txt"]),
    (["--lr", "-0.1", "x"], {"set_args": {"--lr": "0.2"}}, ["--lr", "0.2", "x"]),
    (["--lr", "-0.1", "x"], {"remove_args": ["--lr"]}, ["x"]),
    (["--flag", "--k", "v"], {"remove_args": ["--flag"]}, ["--k", "v"]),
    # positionals after `--` are never edited, and new options go before it
    (["--k", "1", "--", "--k", "2"], {"set_args": {"--k": "9", "--new": "x"}}, ["--k", "9", "--new", "x", "--", "--k", "2"]),
    (["a", "--k", "1", "b"], {"set_args": {"--k": "2"}, "append_args": ["--z"]}, ["a", "--k", "2", "b", "--z"]),
])
def test_set_args_forms(argv, changes, expected):
    assert C.apply_arg_changes(["py", "t.py", *argv], changes) == ["py", "t.py", *expected]


def test_set_args_refuses_a_positional_key():
    with pytest.raises(StallcaseError, match="not a flag"):
        C.apply_arg_changes(["py", "t.py", "x"], {"set_args": {"x": "y"}})


def _snap(tmp_path):
    inc = make_incident(tmp_path)
    rec = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    return rec, records.digest_of(rec)


def _objects(store: Path) -> set[str]:
    return set(CAS(store).iter_digests())


def test_patch_that_applies_nothing_inside_a_work_tree_is_refused(tmp_path, monkeypatch):
    """TMPDIR inside a git work tree: git apply would apply relative to its top and skip the rest."""
    snap, d = _snap(tmp_path)
    outer = tmp_path / "outer"
    outer.mkdir()
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    (outer / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(outer / "tmp"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    good = tmp_path / "good.patch"
    good.write_text("--- a/work.py\n+++ b/work.py\n@@ -1,2 +1,3 @@\n \n+# candidate change\n import json, os, sys, time\n")
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(good)})
    assert p.arms.candidate.sources != p.arms.baseline.sources
    # a patch of a file the tree does not hold: git would skip it and exit 0 in a work tree
    other = tmp_path / "other.patch"
    other.write_text("--- a/elsewhere.py\n+++ b/elsewhere.py\n@@ -1 +1 @@\n-x\n+y\n")
    before = _objects(tmp_path / "results")
    with pytest.raises(StallcaseError, match="does not apply|changes no file"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(other)})
    assert _objects(tmp_path / "results") == before


def test_patch_that_changes_nothing_is_refused(tmp_path):
    snap, d = _snap(tmp_path)
    noop = tmp_path / "noop.patch"
    noop.write_text("--- a/work.py\n+++ b/work.py\n@@ -1,2 +1,2 @@\n \n import json, os, sys, time\n")
    with pytest.raises(StallcaseError, match="does not apply|changes no file"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(noop)})


def test_patch_made_symlink_is_refused_and_its_target_never_stored(tmp_path):
    """Escape 2 of issue 17: a symlink's target (any readable file) must never reach the store."""
    snap, d = _snap(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"top secret bytes 0123456789\n")
    patch = tmp_path / "link.patch"
    patch.write_text(f"diff --git a/leak b/leak\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/leak\n"
                     f"@@ -0,0 +1 @@\n+{secret}\n\\ No newline at end of file\n")
    before = _objects(tmp_path / "results")
    with pytest.raises(StallcaseError, match="symlink"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(patch)})
    assert _objects(tmp_path / "results") == before
    store = tmp_path / "results" / "cas"
    assert not any(f.read_bytes() == secret.read_bytes() for f in store.rglob("*") if f.is_file())


def test_tree_check_refuses_a_symlink_however_made(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.py").write_text("x")
    os.symlink("/etc/hostname", tmp_path / "t" / "leak")
    with pytest.raises(StallcaseError, match="symlink 'leak'"):
        C.read_tree(tmp_path / "t", "patch")


def test_patch_cannot_write_outside_the_tree(tmp_path):
    snap, d = _snap(tmp_path)
    patch = tmp_path / "escape.patch"
    patch.write_text("--- /dev/null\n+++ b/../../escaped.txt\n@@ -0,0 +1 @@\n+owned\n")
    with pytest.raises(StallcaseError):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"patch": str(patch)})
    assert not list(tmp_path.rglob("escaped.txt"))


MARKER_SCRIPT = "#!/bin/sh\ntouch {marker}\ncat\n"


def _hostile_repo(root: Path, marker: Path) -> Path:
    """A repository whose own config would run code on checkout, status, diff or any hook."""
    repo = root / "hostile"
    repo.mkdir()
    g = lambda *a: subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                  check=True, capture_output=True)
    g("init", "-q")
    (repo / "work.py").write_text((root / "src" / "work.py").read_text())
    g("add", "work.py"); g("commit", "-qm", "base")
    (repo / "work.py").write_text((root / "src" / "work.py").read_text() + "\n# the ref's change\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    g("add", "work.py", ".gitattributes"); g("commit", "-qm", "cand"); g("branch", "cand")
    script = root / "evil.sh"
    script.write_text(MARKER_SCRIPT.format(marker=marker))
    script.chmod(0o755)
    hooks = repo / ".git" / "hooks"
    for hook in ("post-checkout", "pre-commit", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(MARKER_SCRIPT.format(marker=marker))
        (hooks / hook).chmod(0o755)
    for key, val in (("filter.evil.smudge", str(script)), ("filter.evil.clean", str(script)),
                     ("filter.evil.process", str(script)), ("diff.evil.textconv", str(script)),
                     ("core.fsmonitor", str(script)), ("core.pager", str(script)), ("core.sshCommand", str(script))):
        subprocess.run(["git", "-C", str(repo), "config", key, val], check=True)
    return repo


def test_git_ref_never_runs_git_in_the_incidents_repository(tmp_path):
    """Escape 1 of issue 17: the manifest's provenance.source.root names a repository with a smudge filter."""
    marker = tmp_path / "PWNED"
    make_incident(tmp_path)
    repo = _hostile_repo(tmp_path, marker)
    inc = make_incident(tmp_path)
    import json

    m = json.loads((inc / "manifest.json").read_text())
    m["provenance"]["source"] = {"root": str(repo)}
    (inc / "manifest.json").write_text(json.dumps(m))
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    d = records.digest_of(snap)
    with pytest.raises(StallcaseError, match="name the repository"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"git_ref": "cand"})
    assert not marker.exists()
    # Even the user naming that very repository runs only plumbing that applies no filter or hook.
    p = P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"git_ref": "cand"}, source_repo=str(repo))
    assert not marker.exists()
    R.materialize_arm(p, "B", tmp_path / "results", tmp_path / "wB")
    assert "# the ref's change" in (tmp_path / "wB" / "work.py").read_text()
    assert not marker.exists()


def test_git_ref_with_a_symlink_is_refused(tmp_path):
    snap, d = _snap(tmp_path)
    repo = tmp_path / "src"
    g = lambda *a: subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                                  check=True, capture_output=True)
    g("init", "-q"); g("add", "work.py"); g("commit", "-qm", "base")
    os.symlink(str(tmp_path / "data.bin"), repo / "leak")
    g("checkout", "-qb", "cand"); g("add", "leak"); g("commit", "-qm", "link")
    before = _objects(tmp_path / "results")
    with pytest.raises(StallcaseError, match="symlink"):
        P.build_plan(snap, d, tmp_path / "results", design=DESIGN, candidate={"git_ref": "cand", "repo": str(repo)})
    assert _objects(tmp_path / "results") == before


def test_git_ref_changes_the_whole_tree_not_only_the_script(tmp_path):
    from program_factory import git, make_program, record

    repo = make_program(tmp_path)
    inc = record(repo, tmp_path / "incidents", "--steps", "3")
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    git(repo, "checkout", "-qb", "fix")
    (repo / "pkg" / "model_def.py").write_text((repo / "pkg" / "model_def.py").read_text().replace("0.001", "0.0005"))
    git(repo, "commit", "-qam", "faster model")
    p = P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN,
                     candidate={"git_ref": "fix", "repo": str(repo)})
    a = {s.relpath: s.digest for s in p.arms.baseline.sources}
    b = {s.relpath: s.digest for s in p.arms.candidate.sources}
    assert [r for r in a if a[r] != b.get(r)] == ["pkg/model_def.py"]
    assert set(a) == set(b)  # the untracked helper stays, as pinned
    with pytest.raises(StallcaseError, match="same files"):
        P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN,
                     candidate={"git_ref": "master" if "master" in git(repo, "branch") else "main", "repo": str(repo)})
