"""`stallcase export INCIDENT_DIR -o trace.json [--diagnosis FILE]`: Chrome/Perfetto trace JSON."""

from __future__ import annotations

import argparse

NAME = "export"
HELP = "export an incident (and its diagnosis findings) as Chrome/Perfetto trace JSON"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident_dir", help="incident directory")
    p.add_argument("-o", "--output", required=True, help="trace JSON to write (open in ui.perfetto.dev)")
    p.add_argument("--diagnosis", default=None, help="diagnosis.json whose findings become annotations")


def run(args: argparse.Namespace) -> int:
    from ..core.incident import read_incident
    from ..diagnose.stored import load_diagnosis
    from ..report.perfetto import export_perfetto
    from ..report.text import wrote_line

    inc = read_incident(args.incident_dir)
    diag = load_diagnosis(args.diagnosis) if args.diagnosis else None
    print(wrote_line(export_perfetto(inc, diag, args.output)))
    return 0
