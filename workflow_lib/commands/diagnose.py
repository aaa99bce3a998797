"""`stallcase diagnose INCIDENT_DIR [-o FILE] [--step-pattern REGEX] [--wait-span REGEX]`."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "diagnose"
HELP = "diagnose an incident: per-step measures and checked findings (diagnosis.json)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("incident_dir", help="incident directory (manifest.json + tables/)")
    p.add_argument("-o", "--output", default="diagnosis.json",
                   help="where to write the diagnosis (default ./diagnosis.json; the incident directory is left as captured)")
    p.add_argument("--step-pattern", default=None, help="regex with one group (the step id) naming step spans; default: the steps table")
    p.add_argument("--wait-span", action="append", default=None, metavar="REGEX",
                   help="regex naming declared wait spans (repeatable; replaces the defaults)")


def run(args: argparse.Namespace) -> int:
    import re

    from ..diagnose import DiagnoseOptions, diagnose_dir
    from ..errors import InputError

    kw = {"step_pattern": args.step_pattern}
    if args.wait_span:
        for rx in args.wait_span:
            try:
                re.compile(rx)
            except re.error as exc:
                raise InputError("--wait-span", f"not a valid regex {rx!r}: {exc}") from None
        kw["wait_patterns"] = tuple(args.wait_span)
    out = Path(args.output)
    rec = diagnose_dir(args.incident_dir, options=DiagnoseOptions(**kw), out_path=out)
    s = rec["summary"]
    if "collectives" in rec:  # dump-only incident: the collectives verdict is the diagnosis
        from .collectives import verdict_lines

        print(f"wrote {out}: no steps; collectives only")
        for line in verdict_lines(rec["collectives"]):
            print(line)
        return 0
    print(f"wrote {out}: {s['steps']} steps, {s['explained_ns'] / 1e6:.3f} of {s['wall_ns'] / 1e6:.3f} ms explained")
    for e in rec["next_experiments"][:3]:
        print(f"  {e['rank']}. {e['check']}: up to {e['recoverable_upper_bound_ns'] / 1e6:.3f} ms ({e['risk']} risk) - {e['candidate_change']}")
    return 0
