"""`stallcase record [--incident ID] [--trigger ...] [--step-pattern RE] [--outside] -- CMD ARGS...`

A Python program or a torchrun job is recorded in-process with no edit to it
(capture/inprocess/); any other command, or one given --step-pattern or --outside, from outside
(capture/sidecar.py)."""

from __future__ import annotations

import argparse
import sys
import time

NAME = "record"
HELP = ("run a command (no shell) and record it: a Python program or torchrun job in-process (steps, spans, "
        "GC, checkpoints; no edit to it), any other command from outside")
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
    p.add_argument("--outside", action="store_true",
                   help="record a Python program from outside (wall time or --step-pattern) instead of in-process")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


def run(args: argparse.Namespace) -> int:
    from ..capture.inprocess.runner import is_python_command, run_inprocess
    from ..capture.sidecar import record_command
    from ..report.text import recorded_lines, wrote_line

    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    incident = args.incident or time.strftime("rec-%Y%m%dT%H%M%SZ", time.gmtime())
    if is_python_command(cmd) and not args.step_pattern and not args.outside and args.trigger is None:
        got = run_inprocess(cmd, incident_id=incident, incidents_dir=args.incidents_dir)
        for line in recorded_lines(got.incidents, got.missing):
            print(line, file=sys.stderr)
        return got.returncode
    result = record_command(cmd, incident_id=incident, incidents_dir=args.incidents_dir,
                            step_pattern=args.step_pattern, triggers=args.trigger)
    for p in result.incidents:
        print(wrote_line(p), file=sys.stderr)
    return result.returncode
