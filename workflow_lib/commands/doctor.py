"""`stallcase doctor [CONFIG ...] [--config KEY=VALUE ...]`: every configuration key, and a check.

Without arguments: every key of schemas/config.schema.json with what it accepts, its default
and its description. With config files and KEY=VALUE overrides: the config Snakemake would see
(the workflow's config/config.yaml, then the files in order as `snakemake --configfile A B`
merges them, then the overrides typed by the schema: core/config), the same one-line error
the workflow prints for the first problem, or `ok`; and whether the configured incident exists.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "doctor"
HELP = "list every configuration key and what it accepts; check config files (--config KEY=VALUE as for snakemake)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("configfiles", nargs="*", metavar="CONFIG", help="config files to check, merged in order (e.g. config/config.yaml)")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="overrides, as snakemake --config takes them")


def run(args: argparse.Namespace) -> int:
    from ..core import config as cfg
    from ..missing_incident import manifest_path
    from ..plan import metric  # noqa: F401 (registers the plan's check of trials.metric: core/config/values.py)
    from ..report.text import config_keys_lines, config_ok_lines

    if not args.configfiles and not args.config:
        for line in config_keys_lines(cfg.CONFIG_SCHEMA, cfg.describe()):
            print(line)
        return 0
    config = cfg.load(args.configfiles, args.config)
    where = " + ".join(args.configfiles + [f"--config {c}" for c in args.config]) or "config"
    cfg.check(config, where)
    incident = manifest = None
    if "incident" in config and "incidents_dir" in config:
        incident, manifest = config["incident"], manifest_path(config["incidents_dir"], config["incident"])
    for line in config_ok_lines(args.configfiles, cfg.CONFIG_SCHEMA.name, incident, manifest,
                                built_in=manifest is not None and not Path(manifest).is_file()):
        print(line)
    return 0
