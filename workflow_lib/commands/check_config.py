"""`stallcase check-config FILE...`: refuse a config snakemake would hang on, before it reads it."""

from __future__ import annotations

import argparse

NAME = "check-config"
HELP = "check workflow config files (YAML alias expansion, text, output directories) before snakemake reads them"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="config files as given to snakemake --configfile")


def run(args: argparse.Namespace) -> int:
    from ..core import config as cfg
    from ..core.errors import StallcaseError
    from ..report.text import config_file_ok_line

    for f in args.files:
        cfg.check_file(f)  # counts alias expansion on the node graph first
        try:  # over the workflow's defaults, as Snakemake merges a --configfile
            cfg.check(cfg.load([f], []))
        except StallcaseError as exc:  # name the file as well as the key
            raise StallcaseError(f"{f}: {exc.where}", exc.problem) from None
        print(config_file_ok_line(f))
    return 0
