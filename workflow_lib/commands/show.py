"""`stallcase show INCIDENT [--results-dir DIR] [--html [-o FILE]]`: an incident at a glance.

A relative --results-dir is looked for in the current directory and then in each parent, so
`stallcase show demo` works from any subdirectory of the project; when nothing is found the
error lists every place it looked.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..core import layout
from ..core.errors import StallcaseError
from ..core.incident import check_incident_id

NAME = "show"
HELP = "summarize an incident's records in the terminal, or write its HTML report (--html)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident", help="incident id (directory name under --results-dir)")
    p.add_argument("--results-dir", default="results",
                   help="where results live (default: results/, as snakemake writes; looked for here and in each parent directory)")
    p.add_argument("--html", action="store_true", help="write the self-contained HTML report and print its path")
    p.add_argument("-o", "--output", default=None, help="with --html: where to write it (default: <results-dir>/<incident>/report.html)")


def find_results(results_dir: str, incident: str, start: Path | None = None) -> Path:
    """The results directory holding <incident>/snapshot.json: results_dir itself when absolute,
    else the nearest of start/results_dir, start/../results_dir, ... (StallcaseError listing them)."""
    rd = Path(results_dir)
    here = (start or Path.cwd()).resolve()
    places = [rd] if rd.is_absolute() else [d / rd for d in (here, *here.parents)]
    for base in places:
        if Path(layout.snapshot(str(base), incident)).is_file():
            return base
    if rd.is_absolute() or len(places) == 1:
        looked = str(places[0] / incident / "snapshot.json")
    else:
        looked = f"{rd / incident / 'snapshot.json'} in {here} and each parent up to {places[-1].parent}"
    raise StallcaseError(rd / incident / "snapshot.json",
                         f"no snapshot for incident {incident!r}: looked for {looked}; run the workflow from the project "
                         f"directory (snakemake --config incident={incident}) or pass --results-dir")


def run(args: argparse.Namespace) -> int:
    from ..report.build import load_records, write_report_files
    from ..report.text import page_line, summary_text

    incident = check_incident_id(args.incident, "INCIDENT")
    if args.output and not args.html:
        raise StallcaseError("-o", "only with --html")
    results = find_results(args.results_dir, incident)
    r = str(results)
    snapshot = Path(layout.snapshot(r, incident))
    paths = dict(diagnosis_path=Path(layout.diagnosis(r, incident)), plan_path=Path(layout.latest(r, incident, "plan.json")),
                 comparison_path=Path(layout.latest(r, incident, "comparison.json")))
    if args.html:
        # Into the latest run's directory, never over the link that points there.
        out = Path(args.output) if args.output else Path(os.path.realpath(layout.latest(r, incident, "report.html")))
        written = write_report_files(snapshot, *paths.values(), results, out)
        print(page_line(written))
        return 0
    print(summary_text(load_records(snapshot, **paths)), end="")
    return 0
