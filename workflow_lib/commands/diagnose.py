"""`stallcase diagnose INCIDENT_DIR|TRACE.json[.gz]... [-o FILE] [--step-pattern REGEX] [--wait-span REGEX]`.

Given Kineto/Chrome trace files instead of an incident directory, imports them (one per rank)
into a temporary incident and diagnoses it in the same process; the temporary incident is
removed afterwards (use `stallcase import kineto` to keep one)."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "diagnose"
HELP = "diagnose an incident: per-step measures and checked findings (diagnosis.json)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident_dir", nargs="+", metavar="INCIDENT_DIR|TRACE",
                   help="incident directory (manifest.json + tables/), or Kineto/Chrome trace files (.json, .json.gz), one per rank")
    p.add_argument("-o", "--output", default="diagnosis.json",
                   help="where to write the diagnosis (default ./diagnosis.json; the incident directory is left as captured)")
    p.add_argument("--step-pattern", default=None, help="regex with one group (the step id) naming step spans; default: the steps table")
    p.add_argument("--wait-span", action="append", default=None, metavar="REGEX",
                   help="regex naming declared wait spans (repeatable; replaces the defaults)")


def run(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from ..diagnose import DiagnoseOptions, diagnose_to_file
    from ..core.errors import InputError
    from ..report.text import diagnosis_lines

    opts = DiagnoseOptions.from_settings(args.step_pattern, args.wait_span, where="--step-pattern/--wait-span")
    out = Path(args.output)
    paths = [Path(p) for p in args.incident_dir]
    traces = [p for p in paths if p.is_file()]
    if traces and len(traces) != len(paths):
        raise InputError(paths[0], "give one incident directory, or trace files only")
    if not traces:
        if len(paths) != 1:
            raise InputError(paths[1], "one incident directory at a time")
        rec = diagnose_to_file(paths[0], out, options=opts)
    else:
        from ..importers.kineto import import_kineto

        tmp = Path(tempfile.mkdtemp(prefix="stallcase-diagnose-"))
        try:
            inc = import_kineto(traces, incident_id="trace", incidents_dir=tmp, step_pattern=args.step_pattern)
            rec = diagnose_to_file(inc, out, options=DiagnoseOptions.from_settings(None, args.wait_span))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for line in diagnosis_lines(rec, out):
        print(line)
    return 0
