"""`stallcase record [--incident ID] [--trigger ...] [--step-pattern RE] -- CMD ARGS...`"""

from __future__ import annotations

import argparse
import sys
import time

NAME = "record"
HELP = "run a command (no shell) and record NVML, scheduler evidence and provenance around it"
# The recorder runs beside the user's workload and never raises into it: a numeric warning
# in a sampler is not an input error (cli.py, numeric_warnings.py).
NUMERIC_WARNINGS_ARE_ERRORS = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--incident", default=None, help="incident id (default: rec-<UTC time>)")
    p.add_argument("--incidents-dir", default="incidents", help="where incidents are written (default: incidents/)")
    p.add_argument("--trigger", action="append", default=None, metavar="SPEC",
                   help="exit, sigusr1, latency[:k=2,warmup=20,window=64,cooldown=100]; repeatable; default: all three")
    p.add_argument("--step-pattern", default=None, metavar="REGEX",
                   help=r"regex for step-time lines with a named duration group, e.g. 'step (?P<step>\d+) took (?P<ms>[\d.]+) ms'")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


def run(args: argparse.Namespace) -> int:
    from ..capture.sidecar import record_command
    from ..report.text import wrote_line

    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    incident = args.incident or time.strftime("rec-%Y%m%dT%H%M%SZ", time.gmtime())
    result = record_command(cmd, incident_id=incident, incidents_dir=args.incidents_dir,
                            step_pattern=args.step_pattern, triggers=args.trigger)
    for p in result.incidents:
        print(wrote_line(p), file=sys.stderr)
    return result.returncode
