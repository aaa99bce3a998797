"""`stallcase collectives INCIDENT_DIR... [-o FILE]`: who waited on whom across ranks."""

from __future__ import annotations

import argparse

NAME = "collectives"
HELP = "match ranks' collectives by communicator and sequence number; attribute waits to late ranks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incidents", nargs="+", help="incident directories (one or several; each rank once)")
    p.add_argument("-o", "--output", default=None, help="write the collectives record (JSON) here")
    p.add_argument("--min-wait-ms", type=float, default=None, help="smallest wait worth attributing (default 1 ms)")


def summary_lines(record: dict) -> list[str]:
    s = record["summary"]
    lines = [f"ranks: {', '.join(sorted(record['ranks'], key=int)) or 'none'}; ops: {s['ops']} "
             f"(matched {s['matched']}, mismatch {s['mismatch']}, not_joined {s['not_joined']}, "
             f"cannot_decide {s['cannot_decide']}, incomplete_window {s['incomplete_window']})",
             f"attributed {s['attributed']}, not attributed {s['not_attributed']}, unresolved {s['unresolved']}"]
    for c in record["communicators"]:
        first = c["first_problem"]
        lines.append(f"  {c['comm']}: {c['ops']} ops, members {c['expected_ranks']}"
                     + (f", missing dumps {c['ranks_missing_dump']}" if c["ranks_missing_dump"] else "")
                     + (f", first problem at seq {first['seq_id']} ({first['status']})" if first else ""))
    for op in record["ops"]:
        a = op["attribution"]
        if a and a["verdict"] == "attributed":
            waits = ", ".join(f"rank {r} {w / 1e6:.2f} ms" for r, w in a["wait_ns"].items())
            lines.append(f"  late: {op['comm']} seq {op['seq_id']} {op['op_type']}: rank {a['late_rank']} "
                         f"({a['method']}); waited: {waits}")
        elif op["status"] in ("mismatch", "not_joined"):
            for m in op["mismatches"]:
                who = m["culprit_ranks"] if m["decided"] else "cannot decide"
                lines.append(f"  {op['status']}: {op['comm']} seq {op['seq_id']} {m['field']}: culprit {who}")
    t = record["transport"]
    lines.append(f"transport: {t['transport']}" + (f" ({t['reason']})" if t["reason"] else ""))
    return lines


def run(args: argparse.Namespace) -> int:
    from .. import records
    from ..collectives import Options, analyze_collectives
    from ..errors import StallcaseError
    from ..incident import read_incident

    if args.min_wait_ms is not None and not args.min_wait_ms >= 0:
        raise StallcaseError("--min-wait-ms", f"must be a non-negative number of milliseconds, got {args.min_wait_ms}")
    opts = Options() if args.min_wait_ms is None else Options(min_wait_ns=int(args.min_wait_ms * 1e6))
    record = analyze_collectives([read_incident(p) for p in args.incidents], opts)
    for line in summary_lines(record):
        print(line)
    if args.output:
        records.write_record(args.output, record, "collectives")
        print(f"wrote {args.output}")
    return 0
