"""The workload command of an incident that was imported, not recorded around its program.

A Kineto trace says what ran, not how to run it again: `stallcase import kineto ...
--workload -- CMD ARGS` records CMD (an argv list, never a shell string) with the cwd and
the allow-listed environment, and pins the scripts it names as sources, so the plan can
rebuild and time it. The trial metric is then the program's own recorder steps when it
uses the FlightRecorder, else its process wall time (metric.py, `auto`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..core import records
from ..core.errors import StallcaseError
from ..core.incident import MANIFEST
from . import provenance

SOURCE_SUFFIXES = (".py", ".sh", ".pl", ".rb", ".jl", ".R", ".lua")


def scripts_in(argv: list[str], cwd: str) -> list[str]:
    """Source files a command names (`python train.py`, `./train.sh`): the argv entries after
    the program that are existing files with a source suffix, or the program itself when it
    is a script file. They are pinned as the workload's sources."""
    out = []
    for k, a in enumerate(argv):
        if a.startswith("-"):
            continue
        path = a if os.path.isabs(a) else os.path.join(cwd, a)
        if os.path.isfile(path) and (Path(a).suffix in SOURCE_SUFFIXES or (k == 0 and os.sep in a)):
            if k == 0 and Path(a).suffix not in SOURCE_SUFFIXES and _is_binary(path):
                continue
            out.append(os.path.abspath(path))
    return out


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return True


def attach_workload(incident_dir: str | os.PathLike, argv: list[str], cwd: str | None = None) -> dict:
    """Record `argv` as the incident's workload (manifest rewritten atomically); returns it."""
    argv = [str(a) for a in argv]
    if not argv:
        raise StallcaseError("--workload", "no command given after --workload --")
    cwd = os.path.abspath(cwd or os.getcwd())
    exe = shutil.which(argv[0], path=os.environ.get("PATH")) if os.sep not in argv[0] else os.path.join(cwd, argv[0])
    if not exe or not os.path.isfile(exe):
        raise StallcaseError("--workload", f"program {argv[0]!r} not found (on PATH or relative to {cwd})")
    mpath = Path(incident_dir) / MANIFEST
    manifest = records.read_record(mpath, "incident_manifest")
    prov, artifacts, errors = provenance.collect(argv=argv, cwd=cwd, executable=os.path.realpath(exe),
                                                 sources=scripts_in(argv, cwd), in_process=False, hash_libraries=False)
    imported = dict(manifest.get("provenance") or {})
    prov = {**prov, "imported": imported} if imported else prov
    manifest["provenance"] = prov
    manifest["artifacts"] = list(manifest.get("artifacts") or []) + artifacts
    manifest["workload"] = {"argv": argv, "cwd": cwd, "env": provenance.allowed_env()}
    rec = dict(manifest.get("recorder") or {})
    rec["steps"] = {"from": "import", "covers": "the imported trace's steps; trials time the workload command"}
    if errors:
        rec["errors"] = list(rec.get("errors", [])) + [f"provenance: {e}" for e in errors]
    manifest["recorder"] = rec
    records.write_record(mpath, manifest, "incident_manifest")
    return manifest["workload"]
