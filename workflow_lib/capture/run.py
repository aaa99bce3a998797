"""`python -m workflow_lib.capture.run [--incident ID] [--incidents-dir DIR] -- CMD ARGS...`: run a
Python program (or a torchrun job) under the in-process capture with no edit to it, as
`python -m cProfile` does (inprocess/runner.py). `stallcase record -- python ...` is the same."""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from .inprocess.runner import describe, run_inprocess
    from ..core.errors import StallcaseError

    p = argparse.ArgumentParser(prog="python -m workflow_lib.capture.run")
    p.add_argument("--incident", default=None)
    p.add_argument("--incidents-dir", default="incidents")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    incident = args.incident or time.strftime("rec-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        result = run_inprocess(cmd, incident_id=incident, incidents_dir=args.incidents_dir)
    except StallcaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path, manifest in result.incidents:
        print(describe(path, manifest), file=sys.stderr)
    if result.missing:
        print(result.missing, file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
