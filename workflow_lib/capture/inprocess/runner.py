"""Run a Python program (or a torchrun job) with in-process capture and no edit to it.

    stallcase record [--incident ID] -- python train.py ARGS
    python -m workflow_lib.capture.run [--incident ID] -- torchrun --nproc_per_node 2 train.py

The command runs as an argv list (never through a shell), with `site/` first on PYTHONPATH
(every Python process it starts then opens a capture session: session.py) and its output
left as it is. The incident's workload is the whole wrapped command, so the trials rerun the
program under the same capture and read the same steps. At the end every incident the run
wrote is listed with its reason (an automatic snapshot says which step set it off).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import StallcaseError
from .. import job
from ..recorder import INCIDENTS_DIR_ENV, RECORDER_ENV
from .session import CONFIG_ENV, PARENT_ENV, WORKLOAD_ENV

SITE_DIR = Path(__file__).resolve().parent / "site"
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the directory holding workflow_lib
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*$")


def is_python_command(argv: list[str]) -> bool:
    """A Python interpreter or a torch launcher (whose ranks are Python): in-process capture applies."""
    return bool(argv) and (bool(_PYTHON.match(os.path.basename(argv[0]))) or job.is_launcher(argv))


@dataclass
class RunResult:
    returncode: int
    incidents: list[tuple[Path, dict]]  # (directory, manifest) of every incident the run wrote
    missing: str | None  # why there is none, when the run should have written one


def child_env(incident_id: str, incidents_dir: str, workload: list[str], environ=None) -> dict[str, str]:
    """The environment the program runs in: the capture's site first on PYTHONPATH."""
    env = dict(os.environ if environ is None else environ)
    paths = [str(SITE_DIR), str(PACKAGE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env[CONFIG_ENV] = json.dumps({"incident": incident_id})
    env[PARENT_ENV] = str(os.getpid())
    env[WORKLOAD_ENV] = json.dumps({"argv": workload, "cwd": os.getcwd()})
    # A trial run already points its snapshots at its own directory: keep that.
    env.setdefault(INCIDENTS_DIR_ENV, os.path.abspath(incidents_dir))
    return env


def run_inprocess(argv: list[str], *, incident_id: str, incidents_dir: str = "incidents") -> RunResult:
    if not argv:
        raise StallcaseError("record", "no command given after --")
    # No `--` before the program: a candidate's set_args edits the program's options, and an
    # option parser (the plan's included) stops at `--`.
    workload = [sys.executable, "-m", "workflow_lib.capture.run", "--incident", incident_id, *argv]
    env = child_env(incident_id, incidents_dir, workload)
    out_dir = Path(env[INCIDENTS_DIR_ENV])
    t_start = time.time()
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        raise StallcaseError(argv[0], f"cannot run: {exc.strerror or exc}") from None

    def forward(signum, frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {}
    if threading_main():
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            previous[s] = signal.signal(s, forward)
    try:
        rc = child.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    found = written_since(out_dir, incident_id, t_start)
    missing = None
    if not found and env.get(RECORDER_ENV, "on").strip().lower() not in ("off", "0", "false", "no"):
        missing = (f"stallcase record: no incident in {out_dir}: the program did not run under the in-process "
                   f"capture (see its messages above), or ended before writing it")
    return RunResult(returncode=rc if rc >= 0 else 128 - rc, incidents=found, missing=missing)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def written_since(out_dir: Path, incident_id: str, t_start: float) -> list[tuple[Path, dict]]:
    """The run's incidents (`ID`, `ID.N`, `ID.latency_change-N[.rankR]`) with their manifests."""
    found = []
    if not out_dir.is_dir():
        return found
    for d in sorted(out_dir.iterdir()):
        if d.name != incident_id and not d.name.startswith(incident_id + "."):
            continue
        m = d / "manifest.json"
        try:
            if m.stat().st_mtime < t_start - 1:
                continue
            found.append((d, json.loads(m.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    return found


def describe(path: Path, manifest: dict) -> str:
    """One line for an incident the run wrote: an automatic snapshot says which step set it off."""
    reason = manifest.get("reason")
    trig = manifest.get("trigger")
    why = reason
    fire = trig.get("last_fire") if isinstance(trig, dict) else None
    if reason == "latency_change" and isinstance(fire, dict) and "step_id" in fire:
        why = (f"latency_change: step {fire['step_id']} took {fire.get('duration_ns', 0) / 1e6:.1f} ms, "
               f"{fire.get('ratio', 0):.1f}x the median {fire.get('median_ns', 0) / 1e6:.1f} ms")
    kind = "automatic snapshot" if reason in ("latency_change", "sigusr1") else "incident"
    rep = manifest.get("recorder") or {}
    steps = f"; steps from {(rep.get('steps') or {}).get('from')}: {(rep.get('usage') or {}).get('steps_seen')}" if rep else ""
    ranks = f"; ranks {manifest['ranks']}" if manifest.get("ranks") else ""
    return f"stallcase: {kind} {path} ({why}{steps}{ranks})"
