"""`stallcase ingest INCIDENT_DIR --results-dir DIR`: the snapshot stage outside Snakemake."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "ingest"
HELP = "ingest an incident directory into the store and write RESULTS/<incident>/snapshot.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident_dir", help="incident directory (manifest.json + tables/); its name is the incident id")
    p.add_argument("--results-dir", default="results", help="results directory holding the store (default: results/)")


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..incident import check_incident_id
    from .. import layout
    from ..snapshot import ingest

    inc = Path(args.incident_dir)
    if not inc.is_dir():
        raise InputError(inc, "incident directory not found")
    incident_id = check_incident_id(inc.resolve().name, str(inc))
    out = Path(layout.snapshot(str(args.results_dir), incident_id))
    rec = ingest(inc, args.results_dir, out)
    print(f"wrote {out}: {len(rec['tables'])} tables, {len(rec['artifacts'])} artifacts")
    return 0
