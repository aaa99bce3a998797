"""`stallcase verify ROOT [--incidents-dir DIR] [--clean-temp] [--repair]`: find corrupt objects and records."""

from __future__ import annotations

import argparse
import sys

NAME = "verify"
HELP = "check every store object's digest and every record's schema under a results directory"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", help="results directory (the store is ROOT/cas/blake3/, records ROOT/<incident>/*.json)")
    p.add_argument("--incidents-dir", default=None, help="also check every incident manifest and table under this directory")
    p.add_argument("--clean-temp", action="store_true",
                   help="remove temp files left by interrupted writes (only when no stallcase writer is running)")
    p.add_argument("--repair", action="store_true",
                   help="also remove corrupt store objects and those no record references (what a refused or killed "
                        "stage stored), and remove the records a rerun rebuilds (a snapshot whose object "
                        "was lost, a comparison without its executions); lists what it cannot repair; only when no "
                        "stallcase writer is running")


def run(args: argparse.Namespace) -> int:
    from ..core.errors import StallcaseError
    from ..report.text import verify_lines
    from ..snapshot.verify import Throttled, verify

    # Progress only to a terminal: stderr of a pipeline run stays the one error line.
    progress = Throttled(lambda line: print(line, file=sys.stderr, flush=True)) if sys.stderr.isatty() else None
    report = verify(args.root, incidents_dir=args.incidents_dir, clean_temp=args.clean_temp, repair=args.repair,
                    progress=progress)
    for line in verify_lines(report, removing=args.clean_temp or args.repair):
        print(line)
    left = report.unrepairable if args.repair else report.corrupt
    if left:
        path, problem = left[0]
        more = f" (and {len(left) - 1} more, listed on stdout)" if len(left) > 1 else ""
        raise StallcaseError(path, f"corrupt: {problem}{more}")
    return 0
