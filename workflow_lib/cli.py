"""`stallcase` command line: one entry point, one module per subcommand.

Each module in workflow_lib/commands/ exposes NAME, HELP, add_arguments(parser) and
run(args) -> int. This file only wires them and is the single top-level handler that
turns a StallcaseError into a one-line `error: ...` and exit status 2.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import pkgutil
import sys

from . import commands
from .core.version import __version__
from .core import numeric_warnings
from .core.errors import StallcaseError


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stallcase", description="GPU performance incidents as repeatable experiments.")
    parser.add_argument("--version", action="version", version=f"stallcase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _strict_numbers=getattr(mod, "NUMERIC_WARNINGS_ARE_ERRORS", True))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if not args._strict_numbers:  # a command that hosts the user's workload (record) never fails on its warnings
            return int(args._run(args) or 0)
        return int(numeric_warnings.call(args._run, numeric_warnings.named_input(args), args) or 0)
    except StallcaseError as exc:
        for line in exc.oneline().splitlines() or [str(exc)]:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except OSError as exc:
        # The environment, not the input: disk full, read-only or vanished directories.
        # One line naming the file, like every other error; nothing here is a bug.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    finally:
        # Free Arrow's tables and readers now, while Arrow is whole: left to the interpreter's
        # teardown, a Parquet reader's thread can be destroyed still joinable and abort the process
        # ("terminate called without an active exception", apache/arrow#34314) after a clean
        # error line (seen once in the corpus test, refusing a 1.8M-step incident).
        gc.collect()


if __name__ == "__main__":  # python -m workflow_lib.cli
    sys.exit(main())
