"""Paths and special files (issue 17): what an incident may make stallcase read, and where
stallcase writes. Each test names the escape or hang it closes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from workflow_lib.core import safe_io
from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.cas import CAS, hash_file
from workflow_lib.core import config
from workflow_lib.core.errors import InputError, StallcaseError
from workflow_lib.core.incident import write_incident

import pyarrow as pa

from workflow_lib.core.incident import source


def check_config(partial: dict) -> None:
    """The whole config check on `partial` merged over the workflow's defaults (as Snakemake merges it)."""
    config.check(config.merge(config.load([], []), partial))


def make_incident(incidents: Path, name: str = "inc1") -> Path:
    """A small valid incident directory (one steps table)."""
    steps = pa.table({"step_id": [0, 1], "thread_id": [1, 1], "start_ns": [10, 30], "end_ns": [20, 40],
                      "rank": pa.array([None, None], pa.int32())})
    manifest = {"incident_id": name, "reason": "manual", "producer": "test", "created_unix_ns": 1,
                "clock": {"host": "monotonic", "unix_minus_host_ns": None}, "sources": {"steps": source("observed")},
                "artifacts": [], "workload": None}
    write_incident(incidents / name, manifest, {"steps": steps})
    return incidents / name


def _no_roots(monkeypatch, cwd: Path) -> None:
    monkeypatch.delenv("STALLCASE_ALLOW_ROOTS", raising=False)
    monkeypatch.chdir(cwd)


def _incident_naming(tmp_path: Path, target: Path, role: str = "source") -> Path:
    inc = make_incident(tmp_path / "incidents")
    m = json.loads((inc / "manifest.json").read_text())
    m.pop("tables")
    m["artifacts"] = [{"role": role, "path": str(target), "relpath": "x.py" if role == "source" else None,
                       "digest": hash_file(target), "size": target.stat().st_size}]
    from workflow_lib.core.incident import read_incident
    tables = read_incident(inc).tables
    write_incident(inc, m, tables)
    return inc


def _objects(root: Path) -> list[str]:
    return sorted(CAS(root).iter_digests())


def test_manifest_naming_a_file_outside_the_incident_is_refused_and_stores_nothing(tmp_path, monkeypatch):
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")
    inc = _incident_naming(tmp_path, secret)
    work = tmp_path / "project"
    work.mkdir()
    _no_roots(monkeypatch, work)
    with pytest.raises(InputError) as e:
        snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "inc1" / "snapshot.json")
    assert str(secret) in str(e.value) and "outside the incident directory" in str(e.value)
    assert _objects(tmp_path / "results") == []
    assert not (tmp_path / "results" / "inc1" / "snapshot.json").exists()


def test_a_declared_root_is_read(tmp_path, monkeypatch):
    src = tmp_path / "myrepo" / "train.py"
    src.parent.mkdir()
    src.write_text("print('train')\n")
    inc = _incident_naming(tmp_path, src)
    _no_roots(monkeypatch, inc)
    snapshot.ingest(inc, tmp_path / "results", tmp_path / "s.json", allow_roots=[tmp_path / "myrepo"])
    assert hash_file(src) in _objects(tmp_path / "results")


def test_a_sparse_terabyte_artifact_is_refused_by_its_size_without_reading_it(tmp_path, monkeypatch):
    # The cap is 16 GiB; a smaller cap and a sparse file just over it take the same path
    # without leaving a terabyte-sized file for other tools on a shared machine to trip over.
    from workflow_lib.core import bounds
    monkeypatch.setattr(bounds, "MAX_ARTIFACT_BYTES", 1 << 20)
    big = tmp_path / "huge.bin"
    with open(big, "wb") as fh:
        fh.truncate(2 << 20)
    small = tmp_path / "small.bin"
    small.write_bytes(b"abc")
    inc = _incident_naming(tmp_path, small, role="input")
    m = json.loads((inc / "manifest.json").read_text())
    m["artifacts"][0].update(path=str(big), size=2 << 20)
    (inc / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match="byte limit"):
        snapshot.ingest(inc, tmp_path / "results", tmp_path / "s.json")


def _finishes(fn, seconds: float = 10.0):
    """Run fn in a thread; fail (instead of hanging the suite) if it blocks."""
    out: dict = {}

    def go():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked: a FIFO or device was opened for reading"
    return out


@pytest.mark.parametrize("reader", ["kineto", "torch_fr", "manifest", "table", "hash"])
def test_a_fifo_is_refused_before_it_can_block(tmp_path, reader):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    if reader == "kineto":
        from workflow_lib.importers.kineto import import_kineto
        fn = lambda: import_kineto([fifo], incident_id="x", incidents_dir=tmp_path / "incs")  # noqa: E731
    elif reader == "torch_fr":
        from workflow_lib.importers.torch_fr import read_dump
        fn = lambda: read_dump(fifo)  # noqa: E731
    elif reader == "manifest":
        from workflow_lib.core.incident import read_incident
        inc = tmp_path / "inc"
        inc.mkdir()
        os.mkfifo(inc / "manifest.json")
        fn = lambda: read_incident(inc)  # noqa: E731
    elif reader == "table":
        from workflow_lib.core.incident import read_incident
        inc = make_incident(tmp_path / "incidents")
        (inc / "tables" / "steps.parquet").unlink()
        os.mkfifo(inc / "tables" / "steps.parquet")
        fn = lambda: read_incident(inc, verify=False)  # noqa: E731
    else:
        fn = lambda: hash_file(fifo)  # noqa: E731
    out = _finishes(fn)
    assert isinstance(out.get("error"), StallcaseError), out
    assert "FIFO" in str(out["error"])


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_given_as_a_dump_is_refused(dev):
    from workflow_lib.importers.torch_fr import read_dump
    out = _finishes(lambda: read_dump(dev))
    assert isinstance(out.get("error"), InputError) and "character device" in str(out["error"])


def test_a_sparse_dump_over_the_cap_is_refused_by_size(tmp_path):
    from workflow_lib.importers.torch_fr import read_dump
    from workflow_lib.core.safe_pickle import MAX_BYTES
    f = tmp_path / "dump_rank0.pkl"
    with open(f, "wb") as fh:  # sparse, just over the cap (the was 100 GB: same path)
        fh.truncate(MAX_BYTES + 1)
    out = _finishes(lambda: read_dump(f))
    assert "byte limit" in str(out.get("error"))


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_an_output_never_replaces_a_fifo_or_a_symlink(tmp_path, kind):
    target = tmp_path / "precious.json"
    target.write_text("{}")
    out = tmp_path / "out.json"
    if kind == "fifo":
        os.mkfifo(out)
    else:
        out.symlink_to(target)
    with pytest.raises(StallcaseError, match="refusing to replace it"):
        safe_io.check_output_file(out)
    from workflow_lib.core.atomic import write_text
    with pytest.raises(StallcaseError, match="refusing to replace it"):
        write_text(out, "x")
    assert (out.is_symlink() and os.readlink(out) == str(target)) or (kind == "fifo" and not out.is_symlink())
    assert target.read_text() == "{}"


def test_the_users_own_config_paths_need_no_allow_roots(tmp_path, monkeypatch):
    """The config is the user's own (trusted) input, like a path on the command line: its
    results_dir and incidents_dir are used as given; only paths from an incident are confined."""
    _no_roots(monkeypatch, tmp_path)
    base = {"incident": "demo", "incidents_dir": "incidents", "results_dir": "results", "trials": {}}
    check_config(dict(base))
    check_config(dict(base, incidents_dir=str(tmp_path.parent / "elsewhere-incidents")))
    check_config(dict(base, results_dir="../elsewhere"))
    assert not (tmp_path.parent / "elsewhere").exists()  # checking creates nothing


def test_a_metric_regex_without_a_group_is_refused_at_config_time(tmp_path, monkeypatch):
    _no_roots(monkeypatch, tmp_path)
    base = {"incident": "demo", "incidents_dir": "incidents", "results_dir": "results"}
    with pytest.raises(StallcaseError, match="has no group"):
        check_config(dict(base, trials={"metric": {"source": "stdout_regex", "regex": r"step_time=[0-9.]+"}}))
    check_config(dict(base, trials={"metric": {"source": "stdout_regex", "regex": r"step_time=([0-9.]+)"}}))


def test_candidate_env_names_and_values_are_checked(tmp_path, monkeypatch):
    _no_roots(monkeypatch, tmp_path)
    base = {"incident": "demo", "incidents_dir": "incidents", "results_dir": "results"}
    with pytest.raises(StallcaseError, match="not an environment variable name"):
        check_config(dict(base, candidate={"env": {"A=B": "1"}}))
    with pytest.raises(StallcaseError, match="NUL"):
        check_config(dict(base, candidate={"env": {"A": "x\x00y"}}))
