"""`stallcase collectives INCIDENT_DIR... [-o FILE]`: who waited on whom across ranks."""

from __future__ import annotations

import argparse

NAME = "collectives"
HELP = "match ranks' collectives by communicator and sequence number; attribute waits to late ranks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incidents", nargs="+", help="incident directories (one or several; each rank once)")
    p.add_argument("-o", "--output", default=None, help="write the collectives record (JSON) here")
    p.add_argument("--min-wait-ms", default=None, help="smallest wait worth attributing (default 1 ms)")
    p.add_argument("--all-ops", action="store_true", help="also list every attributed op (default: culprits only)")


def run(args: argparse.Namespace) -> int:
    from ..core import records
    from ..collectives import Options, analyze_collectives
    from ..core.errors import StallcaseError
    from ..core.incident import read_incident
    from ..report.text import collectives_summary_lines, wrote_line
    from ..core.config.numbers import MIN_WAIT_MS, number

    opts = Options() if args.min_wait_ms is None else Options(min_wait_ns=round(number(args.min_wait_ms, "--min-wait-ms", MIN_WAIT_MS) * 1e6))
    record = analyze_collectives([read_incident(p) for p in args.incidents], opts)
    for line in collectives_summary_lines(record, all_ops=getattr(args, "all_ops", False)):
        print(line)
    if args.output:
        records.write_record(args.output, record, "collectives")
        print(wrote_line(args.output))
    return 0
