"""`stallcase import FORMAT FILE... --incident ID [--workload -- CMD ARGS...]`: traces users already
have -> an incident directory; with --workload, also the command the trials run (last option).
For nsys, --incident may be left out: the export's file name is the id."""

from __future__ import annotations

import argparse

NAME = "import"
HELP = "import existing traces (kineto, nsys, torch-fr) into an incident directory"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=["kineto", "nsys", "torch-fr"],
                   help="kineto: PyTorch profiler trace JSON[.gz], one per rank; nsys: Nsight Systems SQLite export "
                        "(nsys export --type sqlite; a .nsys-rep is exported when nsys is on the PATH), one or one per rank; "
                        "torch-fr: PyTorch NCCL flight-recorder dumps")
    p.add_argument("files", nargs="+", help="trace or dump files")
    p.add_argument("--incident", default=None, help="incident id (directory name under --incidents-dir); "
                   "required except for nsys, whose default is the first export's file name")
    p.add_argument("--incidents-dir", default="incidents", help="where incidents live (default: incidents/, as snakemake reads)")
    p.add_argument("--step-pattern", default=None, help="kineto, nsys: regex naming step annotations or NVTX ranges, one group capturing the step number (default ProfilerStep#N)")
    p.add_argument("--hostname", default=None, help="torch-fr: the host that wrote these dumps (they name none); "
                   "without it each rank is its own clock domain")
    p.add_argument("--workload", nargs=argparse.REMAINDER, default=None, metavar="-- CMD",
                   help="last option: the command that produced the trace (argv, no shell), e.g. --workload -- python train.py; "
                        "the plan rebuilds and times it")
    _workload_last(p)


def _workload_last(p: argparse.ArgumentParser) -> None:
    """Everything after --workload (and an optional `--`) is the command, verbatim: argparse
    alone refuses `--workload -- CMD` after a variable number of trace files."""
    parse = p.parse_known_args

    def parse_known_args(args=None, namespace=None):
        args = list(args or [])
        if "--workload" not in args:
            return parse(args, namespace)
        k = args.index("--workload")
        cmd = args[k + 1:]
        ns, extra = parse(args[:k], namespace)
        ns.workload = cmd[1:] if cmd[:1] == ["--"] else cmd
        return ns, extra

    p.parse_known_args = parse_known_args


def run(args: argparse.Namespace) -> int:
    from ..report.text import workload_line, wrote_line

    if args.incident is None:
        if args.format != "nsys":
            from ..core.errors import InputError

            raise InputError("--incident", f"required for {args.format}: name the incident to write")
        from ..importers.nsys import default_incident_id

        args.incident = default_incident_id(args.files[0])
    if args.format == "kineto":
        from ..importers.kineto import import_kineto

        out = import_kineto(args.files, incident_id=args.incident, incidents_dir=args.incidents_dir, step_pattern=args.step_pattern)
    elif args.format == "nsys":
        from ..importers.nsys import import_nsys

        out = import_nsys(args.files, incident_id=args.incident, incidents_dir=args.incidents_dir, step_pattern=args.step_pattern)
    else:
        from ..importers.torch_fr import import_torch_fr

        out = import_torch_fr(args.files, incident_id=args.incident, incidents_dir=args.incidents_dir, hostname=args.hostname)
    if args.workload is not None:
        from ..capture.workload import attach_workload

        workload = attach_workload(out, list(args.workload))
        print(workload_line(workload))
    print(wrote_line(out))
    return 0
