"""`stallcase ingest INCIDENT_DIR --results-dir DIR`: the snapshot stage outside Snakemake."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "ingest"
HELP = "ingest an incident directory into the store and write RESULTS/<incident>/snapshot.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident_dir", help="incident directory (manifest.json + tables/); its name is the incident id")
    p.add_argument("--results-dir", default="results", help="results directory holding the store (default: results/)")
    p.add_argument("--allow-root", action="append", default=[], metavar="DIR",
                   help="a directory the incident's sources and inputs may be read from (repeatable; the working "
                        "directory and the incident itself always are; docs/security.md)")


def run(args: argparse.Namespace) -> int:
    from ..core.errors import InputError
    from ..core.incident import check_incident_id
    from ..core import layout
    from ..report.text import snapshot_line
    from ..snapshot.build import ingest

    inc = Path(args.incident_dir)
    if not inc.is_dir():
        raise InputError(inc, "incident directory not found")
    incident_id = check_incident_id(inc.resolve().name, str(inc))
    out = Path(layout.snapshot(str(args.results_dir), incident_id))
    rec = ingest(inc, args.results_dir, out, allow_roots=args.allow_root)
    print(snapshot_line(out, rec))
    return 0
