"""`stallcase import FORMAT FILE... --incident ID`: traces users already have -> an incident directory."""

from __future__ import annotations

import argparse

NAME = "import"
HELP = "import existing traces (kineto, torch-fr) into an incident directory"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["kineto", "torch-fr"], help="kineto: PyTorch profiler trace JSON[.gz], one per rank; torch-fr: PyTorch NCCL flight-recorder dumps")
    p.add_argument("files", nargs="+", help="trace or dump files")
    p.add_argument("--incident", required=True, help="incident id (directory name under --incidents-dir)")
    p.add_argument("--incidents-dir", default="incidents", help="where incidents live (default: incidents/, as snakemake reads)")
    p.add_argument("--step-pattern", default=None, help="kineto: regex naming step annotations (default ProfilerStep#N)")
    p.add_argument("--hostname", default=None, help="torch-fr: the host that wrote these dumps (they name none); "
                   "without it each rank is its own clock domain")


def run(args: argparse.Namespace) -> int:
    if args.format == "kineto":
        from ..importers.kineto import import_kineto

        out = import_kineto(args.files, incident_id=args.incident, incidents_dir=args.incidents_dir, step_pattern=args.step_pattern)
    else:
        from ..importers.torch_fr import import_torch_fr

        out = import_torch_fr(args.files, incident_id=args.incident, incidents_dir=args.incidents_dir, hostname=args.hostname)
    print(f"wrote {out}")
    return 0
