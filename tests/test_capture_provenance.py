"""Provenance: argv, cwd, executable, packages, mapped libraries, git state, declared files."""

from __future__ import annotations

import os
import subprocess
import sys

from workflow_lib.capture import provenance
from workflow_lib.core.cas import hash_file
from workflow_lib.core.incident import read_incident

from capture_helpers import recorder


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _repo(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / "train.py").write_text("print('hi')\n")
    _git(root, "add", "train.py")
    _git(root, "commit", "-q", "-m", "first")
    return root


def test_git_state_clean_then_dirty(tmp_path):
    root = _repo(tmp_path)
    clean = provenance.git_state(root)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False and clean["diff_digest"] is None
    (root / "train.py").write_text("print('changed')\n")
    dirty = provenance.git_state(root)
    assert dirty["dirty"] is True and len(dirty["diff_digest"]) == 64
    assert dirty["commit"] == clean["commit"]


def test_collect_in_process(tmp_path):
    root = _repo(tmp_path)
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * 1000)
    prov, artifacts, errors = provenance.collect(
        argv=[str(root / "train.py"), "--lr", "1"], cwd=str(tmp_path), executable=sys.executable,
        inputs=[str(data), str(tmp_path / "missing.bin")])
    assert prov["argv"][1:] == ["--lr", "1"]
    assert prov["python_version"] == sys.version.split()[0]
    assert "numpy" in {k.lower() for k in prov["packages"]}
    assert prov["source"]["root"] == str(root)
    roles = {a["role"] for a in artifacts}
    assert {"binary", "source", "input", "library"} <= roles
    src = next(a for a in artifacts if a["role"] == "source")
    assert src["relpath"] == "train.py" and src["digest"] == hash_file(root / "train.py")
    inp = next(a for a in artifacts if a["role"] == "input")
    assert inp["size"] == 1000 and inp["relpath"] is None
    assert any("missing.bin" in e for e in errors)
    libs = provenance.mapped_libraries()
    assert any("libpython" in l or "numpy" in l or "_multiarray" in l for l in libs)


def test_allowed_env_keeps_only_listed_names():
    env = {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO", "TORCH_LOGS": "x", "AWS_SECRET_ACCESS_KEY": "s", "HOME": "/h"}
    assert provenance.allowed_env(env) == {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO", "TORCH_LOGS": "x"}


def test_snapshot_manifest_carries_declared_inputs_and_sources(tmp_path):
    root = _repo(tmp_path)
    data = tmp_path / "in.txt"
    data.write_text("abc")
    rec = recorder(tmp_path, sources=("host",))
    rec.declare_input(data)
    rec.declare_source(root / "train.py")
    with rec:
        path = rec.snapshot("manual")
    m = read_incident(path).manifest
    arts = {(a["role"], os.path.basename(a["path"])): a for a in m["artifacts"]}
    assert ("input", "in.txt") in arts and ("source", "train.py") in arts
    assert arts[("input", "in.txt")]["digest"] == hash_file(data)
    assert m["workload"]["cwd"] == os.getcwd()
    assert m["provenance"]["executable"] == sys.executable


def test_packages_and_imported_distributions_are_importlibs_own():
    """provenance reads each distribution's METADATA headers once (the fast path); what it finds
    must be what importlib's full parse finds: every name and version, and every imported module's
    distributions as `packages_distributions()` maps them."""
    from importlib import metadata

    import pyarrow  # noqa: F401  (imported modules of several distributions, whatever the test order)
    import yaml  # noqa: F401

    full: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        if name and name not in full:
            full[name] = dist.version or ""
    assert provenance.packages() == dict(sorted(full.items()))
    tops = metadata.packages_distributions()
    imported = {d: full[d] for top in {m.partition(".")[0] for m in list(sys.modules)} for d in tops.get(top, []) if d in full}
    got = provenance.imported_distributions()
    assert got == dict(sorted(imported.items())) and {"pyarrow", "PyYAML"} <= set(got), got
