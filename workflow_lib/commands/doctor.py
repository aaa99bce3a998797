"""`stallcase doctor [CONFIG ...] [--config KEY=VALUE ...]`: every configuration key, and a check.

Without arguments: every key of schemas/config.schema.json with what it accepts, its default
and its description. With config files (merged in order, as `snakemake --configfile A B`
does) and KEY=VALUE overrides: the same one-line error the workflow prints for the first
problem, or `ok`; and whether the configured incident exists.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "doctor"
HELP = "list every configuration key and what it accepts; check config files (--config KEY=VALUE as for snakemake)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("configfiles", nargs="*", metavar="CONFIG", help="config files to check, merged in order (e.g. config/config.yaml)")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="overrides, as snakemake --config takes them")


def _merge(base: dict, extra: dict) -> dict:
    """Snakemake's update_config: nested mappings merge, everything else replaces."""
    for k, v in extra.items():
        base[k] = _merge(dict(base[k]), v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


def _override(item: str) -> tuple[str, object]:
    import yaml

    from ..core.errors import StallcaseError

    key, sep, value = item.partition("=")
    if not sep or not key:
        raise StallcaseError("--config", f"{item!r} is not KEY=VALUE")
    return key, yaml.safe_load(value) if value else value


def run(args: argparse.Namespace) -> int:
    import yaml

    from ..core import config_errors
    from ..config_check import check_config_file
    from ..config_check import check_config_numbers
    from ..core.errors import StallcaseError
    from ..missing_incident import manifest_path
    from ..report.text import config_keys_lines, config_ok_lines

    if not args.configfiles and not args.config:
        for line in config_keys_lines(config_errors.CONFIG_SCHEMA, config_errors.describe()):
            print(line)
        return 0
    config: dict = {}
    for f in args.configfiles:
        check_config_file(f)  # a regular file of UTF-8 text (a binary file is one line, not a UnicodeDecodeError)
        try:
            loaded = yaml.safe_load(Path(f).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise StallcaseError(f, f"not valid YAML: {' '.join(str(exc).split())}") from None
        if not isinstance(loaded, dict):
            raise StallcaseError(f, "a config file holds a mapping of keys")
        _merge(config, loaded)
    for item in args.config:
        k, v = _override(item)
        _merge(config, {k: v})
    where = " + ".join(args.configfiles + [f"--config {c}" for c in args.config]) or "config"
    config_errors.check(config, where=where)
    check_config_numbers(config, where)
    incident = manifest = None
    if "incident" in config and "incidents_dir" in config:
        incident, manifest = config["incident"], manifest_path(config["incidents_dir"], config["incident"])
    for line in config_ok_lines(args.configfiles, config_errors.CONFIG_SCHEMA.name, incident, manifest,
                                built_in=manifest is not None and not Path(manifest).is_file()):
        print(line)
    return 0
