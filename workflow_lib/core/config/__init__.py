"""The workflow configuration: every check of it, in one place.

    files.check_file      a config file before anyone reads it (text, YAML alias expansion)
    overrides             `--config KEY=VALUE` read as Snakemake reads it, typed by the schema
    values.check_values   what a schema cannot say: text, env names, the metric regex
    numbers               every number a user sets (config keys, CLI flags, recorder options)
                          and the caps derived from the memory budget
    schema                schemas/config.schema.json: one-line errors, `describe` for doctor

`check` runs them in that order on a merged config; the Snakefile (`exit_on_error`),
`stallcase doctor` and `stallcase check-config` (`load`, then `check`) all come through here,
so the three agree on what a config means.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import StallcaseError
from . import numbers, overrides, schema, values
from .files import check_file
from .schema import CONFIG_SCHEMA, ConfigError, describe, load_schema

# The workflow's own defaults: the Snakefile's `configfile:`, which Snakemake reads before any
# --configfile and merges them over it.
DEFAULTS = Path(__file__).resolve().parents[3] / "config" / "config.yaml"

__all__ = ["CONFIG_SCHEMA", "DEFAULTS", "ConfigError", "check", "check_file", "describe", "exit_on_error", "load",
           "load_schema", "merge"]


def check(config: dict, where: str = "config", schema_path: str | os.PathLike = CONFIG_SCHEMA) -> None:
    """Raise StallcaseError (one line, naming the key) for the first problem of a merged config."""
    values.check_values(config)
    numbers.check_numbers(config, where)
    schema.check(config, schema_path, where)


def merge(base: dict, extra: dict) -> dict:
    """Snakemake's update_config: nested mappings merge, everything else replaces."""
    for k, v in extra.items():
        base[k] = merge(dict(base[k]), v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


def load(files: list[str], items: list[str], defaults: str | os.PathLike | None = DEFAULTS) -> dict:
    """The config Snakemake would see: the workflow's defaults, then `files` in order
    (--configfile), then `items` (--config KEY=VALUE), typed by the schema."""
    import yaml

    config: dict = {}
    for f in ([defaults] if defaults else []) + list(files):
        check_file(f)  # a regular file of UTF-8 text, aliases counted before anything is built
        try:
            loaded = yaml.safe_load(Path(f).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise StallcaseError(f, f"not valid YAML: {' '.join(str(exc).split())[:200]}") from None
        if not isinstance(loaded, dict):
            raise StallcaseError(f, "a config file holds a mapping of keys")
        merge(config, loaded)
    given = overrides.parse(items)
    merge(config, given)
    overrides.coerce(config, given, load_schema())
    return config


def exit_on_error(config: dict, schema_path: str | os.PathLike = CONFIG_SCHEMA, given: dict | None = None) -> None:
    """For the Snakefile: the --config values typed by the schema (in place), then `check`'s one
    line and exit 1 (an exception raised while Snakemake parses the Snakefile is printed with
    its traceback)."""
    import sys

    try:
        if given:
            overrides.coerce(config, given, load_schema(schema_path))
        check(config, schema_path=schema_path)
    except StallcaseError as exc:
        print(f"error: {exc.oneline()}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
