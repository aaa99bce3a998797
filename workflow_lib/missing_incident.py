"""A missing incident in one line: where it was looked for and how to make one.

Snakemake alone answers a missing incident with a MissingInputException naming a file and
no way forward; the workflow checks first (rules/snapshot.smk's input function).
"""

from __future__ import annotations

import os
from pathlib import Path

from .core.errors import StallcaseError

BUILT_IN = frozenset({"demo"})
"""Incidents a workflow rule records itself (rules/capture.smk): their manifest may not exist yet."""


class MissingIncident(StallcaseError):
    """No incident directory with a manifest.json where the configuration says incidents live."""


def manifest_path(incidents_dir: str | os.PathLike, incident: str) -> str:
    """The incident's manifest.json; raises MissingIncident (one line) when it is absent and no
    rule of the workflow can record it."""
    path = Path(incidents_dir) / incident / "manifest.json"
    if incident in BUILT_IN or path.is_file():
        return str(path)
    found = sorted(p.parent.name for p in Path(incidents_dir).glob("*/manifest.json"))[:5] if Path(incidents_dir).is_dir() else []
    have = f"it holds: {', '.join(found)}" if found else "it holds none"
    raise MissingIncident(path.resolve(), f"no incident '{incident}' (looked for its manifest.json under incidents_dir "
                                          f"'{incidents_dir!s}'; {have}); make one with: stallcase record --incident {incident} "
                                          f"-- YOUR_COMMAND, or stallcase import kineto TRACE --incident {incident}, "
                                          f"or use the built-in demo: --config incident=demo")


def exit_if_missing(incidents_dir: str | os.PathLike, incident: str) -> None:
    """For the Snakefile: the configured incident's one-line error and exit 1, before Snakemake
    builds its DAG (an exception there is printed with a traceback)."""
    import sys

    try:
        manifest_path(incidents_dir, incident)
    except MissingIncident as exc:
        print(f"error: {exc.oneline()}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
