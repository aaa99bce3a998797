"""`stallcase show INCIDENT [--results-dir DIR] [--html [-o FILE]]`: an incident at a glance."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import StallcaseError
from ..incident import check_incident_id

NAME = "show"
HELP = "summarize an incident's records in the terminal, or write its HTML report (--html)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident", help="incident id (directory name under --results-dir)")
    p.add_argument("--results-dir", default="results", help="where results live (default: results/, as snakemake writes; the store is in it)")
    p.add_argument("--html", action="store_true", help="write the self-contained HTML report and print its path")
    p.add_argument("-o", "--output", default=None, help="with --html: where to write it (default: <results-dir>/<incident>/report.html)")


def run(args: argparse.Namespace) -> int:
    from .. import layout, report

    incident = check_incident_id(args.incident, "INCIDENT")
    snapshot = Path(layout.snapshot(str(args.results_dir), incident))
    if not snapshot.is_file():
        raise StallcaseError(snapshot, f"no snapshot for incident {incident!r}: run the workflow "
                                       f"(snakemake --config incident={incident}) or pass --results-dir")
    if args.output and not args.html:
        raise StallcaseError("-o", "only with --html")
    r = str(args.results_dir)
    paths = dict(diagnosis_path=Path(layout.diagnosis(r, incident)), plan_path=Path(layout.latest(r, incident, "plan.json")),
                 comparison_path=Path(layout.latest(r, incident, "comparison.json")))
    if args.html:
        # Into the latest run's directory, never over the link that points there.
        out = Path(args.output) if args.output else Path(os.path.realpath(layout.latest(r, incident, "report.html")))
        written = report.write_report_files(snapshot, *paths.values(), args.results_dir, out)
        print(written)
        return 0
    print(report.summary_text(report.load_records(snapshot, **paths)), end="")
    return 0
