"""The README's first-line install (`pip install .`, no extras) is enough for `snakemake --report`,
the Snakemake way to inspect a run: it refuses to run without pygments, which used to come only
with the test extra. And NVML comes from nvidia-ml-py, not the deprecated `pynvml` shim package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _copy_tracked(dest: Path) -> None:
    """The checkout's tracked and not-ignored files (what a clone holds), without build outputs."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for rel in map(os.fsdecode, filter(None, files)):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("plain-install")
    src, venv = base / "src", base / "venv"
    _copy_tracked(src)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # --no-compile: the same resolution and files, without byte-compiling every installed module up
    # front (half the install's CPU: 33.5 -> 16.9 s here); the few modules the tests import compile as used.
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(src)], capture_output=True,
                         text=True, timeout=600, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return venv


@pytest.mark.slow
def test_the_plain_install_holds_the_runtime_dependencies(plain_venv):
    py = str(plain_venv / "bin" / "python")
    probe = ("import importlib.metadata as m, pygments, pynvml; "
             "names = {d.metadata['Name'].lower() for d in m.distributions()}; "
             "print('nvidia-ml-py' in names, 'pynvml' in names)")
    out = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out == ["True", "False"]  # the module from nvidia-ml-py; no deprecated shim package


@pytest.mark.slow
def test_snakemake_report_runs_from_the_plain_install(plain_venv, demo_pipeline, tmp_path):
    snake = tmp_path / "snakemake-report.html"
    argv = [str(plain_venv / "bin" / "python"), *demo_pipeline.base[1:], "--report", str(snake)]
    env = {k: v for k, v in demo_pipeline.env.items() if k != "PYTHONPATH"}
    run = subprocess.run(argv, cwd=demo_pipeline.workdir, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "pygments must be installed" not in run.stderr
    assert snake.stat().st_size > 10_000


@pytest.mark.slow
def test_import_stallcase_from_the_plain_install(plain_venv, tmp_path):
    """A normal (non-editable) install carries the public package `stallcase`, mapped from
    workflow_lib/public: importable from anywhere, the same classes as workflow_lib's."""
    py = str(plain_venv / "bin" / "python")
    probe = ("import stallcase, workflow_lib.capture as c; "
             "assert stallcase.FlightRecorder is c.FlightRecorder; "
             "print(stallcase.__file__); print(stallcase.__version__); print(stallcase.Comparison.KIND)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([py, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    where, version, kind = run.stdout.split()
    assert Path(where).is_relative_to(plain_venv) and Path(where).parent.name == "stallcase"
    assert (version, kind) == ("0.1.0", "comparison")
