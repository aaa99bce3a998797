"""Checks on the workflow configuration that a JSON Schema cannot express.

A config is the user's own choice (docs/security.md), but it may be copied from
elsewhere, so it must fail in one line rather than hang or write somewhere unexpected:
  - YAML aliases expand under a cap (bounds.MAX_CONFIG_NODES): `check_config_file` counts
    the expansion on the composed node graph, before anything is built from it. Snakemake
    reads `--configfile` itself and merges nested mappings recursively before any workflow
    code runs, so a "billion laughs" of mappings hangs snakemake, not us: run
    `stallcase check-config FILE` on a config you did not write. `check_config` catches the
    alias expansions that do reach the workflow (lists, which snakemake does not walk);
  - every text value is valid Unicode without NUL, naming its key;
  - results_dir and incidents_dir lie inside the working directory or a declared root
    (`allow_roots`, $STALLCASE_ALLOW_ROOTS): `--config incidents_dir=/etc` is refused;
  - a candidate env name is a plain variable name and its value holds no NUL;
  - a stdout metric regex compiles on the linear-time engine and has the group it reads.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .core import bounds, safe_io
from .core.errors import InputError, StallcaseError
from .core.patterns import compile_pattern

_ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def check_config(config: dict, *, workdir: str | os.PathLike | None = None) -> dict:
    """Raise StallcaseError naming the config key; returns `config` unchanged."""
    try:
        bounds.expanded_size(config, "config", bounds.MAX_CONFIG_NODES, "the configuration")
        _texts(config, "config")
        roots = safe_io.declared_roots([r for r in config.get("allow_roots", []) if isinstance(r, str)], cwd=workdir)
        # The workflow writes into results_dir always, and into incidents_dir only to capture
        # the built-in demo; a user's incident is only read from there (their recorder wrote it).
        written = ("results_dir", "incidents_dir") if config.get("incident") == "demo" else ("results_dir",)
        for key in written:
            if isinstance(config.get(key), str):
                safe_io.check_output_dir(config[key], roots, f"config {key}")
        env = (config.get("candidate") or {}).get("env") if isinstance(config.get("candidate"), dict) else None
        for name, value in (env or {}).items() if isinstance(env, dict) else ():
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise InputError("config candidate.env", f"{name!r} is not an environment variable name (letters, digits, '_')")
            if isinstance(value, str) and "\x00" in value:
                raise InputError(f"config candidate.env.{name}", "value holds a NUL character")
        metric = (config.get("trials") or {}).get("metric") if isinstance(config.get("trials"), dict) else None
        if isinstance(metric, dict) and metric.get("source") == "stdout_regex" and "regex" in metric:
            rx = compile_pattern(metric["regex"], "config trials.metric.regex", multiline=True)
            if rx.groups < 1:
                raise InputError("config trials.metric.regex", f"{metric['regex']!r} has no group: the metric is read from group 1, "
                                                               r"e.g. 'step_time=([0-9.]+)'")
    except InputError as exc:
        raise StallcaseError(exc.where, exc.problem) from None
    return config


def _texts(obj: Any, path: str) -> None:
    stack = [(obj, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            bounds.text(v, p, p)
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str):
                    bounds.text(k, f"{p} key", p)
                stack.append((x, f"{p}.{k}"))
        elif isinstance(v, list):
            stack.extend((x, f"{p}[{i}]") for i, x in enumerate(v))


def check_config_file(path: str | os.PathLike) -> None:
    """A YAML/JSON config file: UTF-8 text whose aliases expand to at most MAX_CONFIG_NODES
    values, counted on the composed nodes (no object is built from an alias bomb)."""
    import yaml

    data = safe_io.read_regular(path, max_bytes=16 << 20)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start}): a config is YAML or JSON text") from None
    if "\x00" in text:
        raise InputError(path, "holds a NUL character: not a text config")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise InputError(path, f"not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    if node is None:
        return
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(node, False)]
    while stack:
        n, done = stack.pop()
        kids = [x for pair in n.value for x in pair] if isinstance(n, yaml.MappingNode) else (
            list(n.value) if isinstance(n, yaml.SequenceNode) else [])
        if not done:
            if id(n) in sizes:
                continue
            if id(n) in on_path:
                raise InputError(path, f"a YAML alias refers to itself (line {n.start_mark.line + 1})")
            on_path.add(id(n))
            stack.append((n, True))
            stack.extend((k, False) for k in kids if id(k) not in sizes)
            continue
        on_path.discard(id(n))
        size = 1 + sum(sizes.get(id(k), 1) for k in kids)
        if size > bounds.MAX_CONFIG_NODES:
            raise InputError(path, f"expands to more than {bounds.MAX_CONFIG_NODES} values through YAML aliases "
                                   f"(line {n.start_mark.line + 1}): refused before snakemake reads it")
        sizes[id(n)] = size
