"""`stallcase collectives INCIDENT_DIR... [-o FILE]`: who waited on whom across ranks."""

from __future__ import annotations

import argparse

NAME = "collectives"
HELP = "match ranks' collectives by communicator and sequence number; attribute waits to late ranks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incidents", nargs="+", help="incident directories (one or several; each rank once)")
    p.add_argument("-o", "--output", default=None, help="write the collectives record (JSON) here")
    p.add_argument("--min-wait-ms", type=float, default=None, help="smallest wait worth attributing (default 1 ms)")
    p.add_argument("--all-ops", action="store_true", help="also list every attributed op (default: culprits only)")


def verdict_lines(v: dict) -> list[str]:
    """The hang verdict of a record or of a diagnosis' `collectives` block, first line first."""
    return _hang_lines(v)


def _hang_lines(record: dict) -> list[str]:
    """The collective the job hung on first, then every culprit in collective order (schema 2)."""
    h = record.get("hung_on")
    lines = []
    if h is None:
        lines.append("hung on: nothing (every op some member recorded was completed by its members)"
                     if "hung_on" in record else "hung on: not available (a version-1 record)")
    else:
        who = (", ".join(f"rank {r}" for r in h["culprit_ranks"]) + f" ({'/'.join(h['kinds'])})") if h["culprit_ranks"] \
            else "no rank singled out"
        lines.append(f"hung on: {h['comm']} seq {h['seq']} {h['op']}: {who}")
        if not h["culprit_ranks"]:
            lines.append(f"  {h['reason']}")
    order = record.get("culprit_order") or {}
    if order and not order.get("exact", True):
        lines.append(f"  (order across communicators: {order['note']})")
    for c in record.get("culprits", []):
        more = f" (+{c['ops_affected'] - 1} later ops)" if c.get("ops_affected", 1) > 1 else ""
        lines.append(f"  {c['kind']}: rank {c['rank']} at {c['comm']} seq {c['seq']} {c['op']}{more}: {c['evidence'][0]}")
        for m in c["missing"]:
            lines.append(f"    missing: {m}")
    return lines


def _clock_line(record: dict) -> str:
    doms = record["clock_domains"]
    groups: dict[int, list] = {}
    for d in doms:
        groups.setdefault(d["group"], []).append(d)
    if len(groups) <= 1:
        unc = max((d["uncertainty_ns"] or 0 for d in doms), default=0)
        return f"clocks: one domain (+/- {unc / 1e6:.3f} ms)"
    unknown = sorted(d["rank"] for d in doms if d.get("rank") is not None and d.get("hostname") is None)
    return (f"clocks: {len(groups)} domains, host times never compared across them"
            + (f" (ranks without a known host: {unknown})" if unknown else "")
            + "; waits come only from GPU durations there")


def summary_lines(record: dict, all_ops: bool = False) -> list[str]:
    s = record["summary"]
    lines = _hang_lines(record) + [f"ranks: {', '.join(sorted(record['ranks'], key=int)) or 'none'}; ops: {s['ops']} "
             f"(matched {s['matched']}, mismatch {s['mismatch']}, not_joined {s['not_joined']}, "
             f"cannot_decide {s['cannot_decide']}, incomplete_window {s['incomplete_window']}"
             + (f", joined_by_counter {s['joined_by_counter']}" if "joined_by_counter" in s else "") + ")",
             f"attributed {s['attributed']}, not attributed {s['not_attributed']}, unresolved {s['unresolved']}"
             + (f", pending (hang, no wait) {s['pending']}" if "pending" in s else ""), _clock_line(record)]
    for c in record["communicators"]:
        first = c["first_problem"]
        lines.append(f"  {c['comm']}: {c['ops']} ops, members {c['expected_ranks']}"
                     + (f", missing dumps {c['ranks_missing_dump']}" if c["ranks_missing_dump"] else "")
                     + (f", first problem at seq {first['seq_id']} ({first['status']})" if first else ""))
    for op in record["ops"]:
        a = op["attribution"]
        if a and a["verdict"] == "attributed" and (all_ops or "culprits" not in record):
            waits = ", ".join(f"rank {r} {w / 1e6:.2f} ms" for r, w in a["wait_ns"].items())
            lines.append(f"  late: {op['comm']} seq {op['seq_id']} {op['op_type']}: rank {a['late_rank']} "
                         f"({a['method']}); waited: {waits}")
        elif op["status"] == "mismatch":
            for m in op["mismatches"]:
                who = m["culprit_ranks"] if m["decided"] else "cannot decide"
                lines.append(f"  {op['status']}: {op['comm']} seq {op['seq_id']} {m['field']}: culprit {who}")
        elif op["status"] == "not_joined" and "hung_on" not in record:
            for m in op["mismatches"]:
                lines.append(f"  not_joined: {op['comm']} seq {op['seq_id']}: culprit {m['culprit_ranks']}")
    t = record["transport"]
    lines.append(f"transport: {t['transport']}" + (f" ({t['reason']})" if t["reason"] else ""))
    return lines


def run(args: argparse.Namespace) -> int:
    from ..core import records
    from ..collectives import Options, analyze_collectives
    from ..core.errors import StallcaseError
    from ..core.incident import read_incident

    if args.min_wait_ms is not None and not args.min_wait_ms >= 0:
        raise StallcaseError("--min-wait-ms", f"must be a non-negative number of milliseconds, got {args.min_wait_ms}")
    opts = Options() if args.min_wait_ms is None else Options(min_wait_ns=int(args.min_wait_ms * 1e6))
    record = analyze_collectives([read_incident(p) for p in args.incidents], opts)
    for line in summary_lines(record, all_ops=getattr(args, "all_ops", False)):
        print(line)
    if args.output:
        records.write_record(args.output, record, "collectives")
        print(f"wrote {args.output}")
    return 0
