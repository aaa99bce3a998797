"""A small multi-module program in its own git repository, recorded by the real recorder.

Not shaped to stallcase: a package with the model, a sibling loader module with a
thread, an untracked helper the program imports, a tracked data file it reads, and a
cwd in an untracked `runs/` directory, as people lay out a training script.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

FILES = {
    "train.py": """
        import os, sys
        from pkg.model_def import forward
        from loader import Loader
        import helper_untracked
        from workflow_lib.capture import FlightRecorder

        steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 4
        rec = FlightRecorder(incident_id=os.environ.get("PROGRAM_INCIDENT", "prog"))
        with rec:
            for i, batch in enumerate(Loader(steps)):
                with rec.step(i):
                    forward(batch)
            if os.environ.get("PROGRAM_SNAPSHOT", "1") == "1":
                rec.snapshot("workload_boundary")
        print("config", open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf", "setup.txt")).read().strip())
    """,
    "pkg/__init__.py": "",
    "pkg/model_def.py": """
        import time
        def forward(batch):
            time.sleep(0.001)
            return sum(batch)
    """,
    "loader.py": """
        import queue, threading
        class Loader:
            def __init__(self, n):
                self.q = queue.Queue(2)
                threading.Thread(target=self._fill, args=(n,), daemon=True).start()
            def _fill(self, n):
                for i in range(n):
                    self.q.put([i, i + 1])
                self.q.put(None)
            def __iter__(self):
                while (b := self.q.get()) is not None:
                    yield b
    """,
    "helper_untracked.py": "VALUE = 1\n",
    "conf/setup.txt": "baseline-config\n",
}
TRACKED = ("train.py", "pkg/__init__.py", "pkg/model_def.py", "loader.py", "conf/setup.txt")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def make_program(root: Path, *, init: bool = True) -> Path:
    """The program in root/proj, its own git repository (init=False: files only)."""
    repo = root / "proj"
    for rel, text in FILES.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip())
    (repo / "runs").mkdir()
    if not init:
        return repo
    git(repo, "init", "-q")
    git(repo, "add", *TRACKED)
    git(repo, "commit", "-qm", "base")
    return repo


def record(repo: Path, incidents: Path, *args: str, incident: str = "prog", env_extra: dict | None = None) -> Path:
    """Run train.py from repo/runs with the recorder on; returns the incident directory."""
    env = dict(os.environ, STALLCASE_INCIDENTS_DIR=str(incidents), PROGRAM_INCIDENT=incident, **(env_extra or {}))
    env.pop("STALLCASE_RECORDER", None)
    subprocess.run([sys.executable, "../train.py", *args], cwd=repo / "runs", env=env, check=True,
                   capture_output=True, text=True, timeout=120)
    return incidents / incident
