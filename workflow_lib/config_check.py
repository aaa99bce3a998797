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
  - results_dir and incidents_dir are the user's own choice (trusted input, like a path on
    the command line) and need no `allow_roots`: only paths that come *from an incident*
    (its artifacts, sources and inputs) are confined to declared roots (snapshot.py);
  - a candidate env name is a plain variable name and its value holds no NUL;
  - a stdout metric regex is given, compiles on the linear-time engine and has the group it reads;
  - every numeric key is finite and in range, and the design fits the memory budget and can
    conclude at its confidence (check_config_numbers, below).
"""

from __future__ import annotations

import os
import re
from typing import Any

from .core import bounds, safe_io
from .compare import stats
from .core.option_numbers import CONFIG_NUMBERS, check_design_size, number
from .core.errors import InputError, StallcaseError
from .core.patterns import compile_pattern

_ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def check_config(config: dict) -> dict:
    """Raise StallcaseError naming the config key; returns `config` unchanged."""
    try:
        bounds.expanded_size(config, "config", bounds.MAX_CONFIG_NODES, "the configuration")
        _texts(config, "config")
        env = (config.get("candidate") or {}).get("env") if isinstance(config.get("candidate"), dict) else None
        for name, value in (env or {}).items() if isinstance(env, dict) else ():
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise InputError("config candidate.env", f"{name!r} is not an environment variable name (letters, digits, '_')")
            if isinstance(value, str) and "\x00" in value:
                raise InputError(f"config candidate.env.{name}", "value holds a NUL character")
        metric = (config.get("trials") or {}).get("metric") if isinstance(config.get("trials"), dict) else None
        if isinstance(metric, dict) and metric.get("source") == "stdout_regex" and not isinstance(metric.get("regex"), str):
            raise InputError("config trials.metric.regex", "is missing: source 'stdout_regex' reads the metric from group 1 of a regex, "
                                                           r"e.g. regex: 'step_time=([0-9.]+)'")
        if isinstance(metric, dict) and metric.get("source") == "stdout_regex":
            rx = compile_pattern(metric["regex"], "config trials.metric.regex", multiline=True)
            if rx.groups < 1:
                raise InputError("config trials.metric.regex", f"{metric['regex']!r} has no group: the metric is read from group 1, "
                                                               r"e.g. 'step_time=([0-9.]+)'")
        _work_declared(metric)
    except InputError as exc:
        raise StallcaseError(exc.where, exc.problem) from None
    check_config_numbers(config)
    return config


def _work_declared(metric) -> None:
    """A metric per item/token must say where each run's work comes from (plan/metric.py and
    plan/work.py decide; what the config alone shows is refused here, before anything runs)."""
    from .core.errors import RecordError
    from .plan import metric as metric_mod

    try:
        metric_mod.check_config(metric)
    except RecordError as exc:
        raise InputError(f"config {exc.where}", exc.problem) from None


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


def exit_on_error(config: dict) -> None:
    """For the Snakefile: `check_config`'s one line and exit 1 (an exception raised while Snakemake
    parses the Snakefile is printed with its traceback, as config_errors.exit_on_error says)."""
    import sys

    try:
        check_config(config)
    except StallcaseError as exc:
        print(f"error: {exc.oneline()}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def check_config_numbers(config: dict, where: str = "config") -> None:
    """Refuse a numeric key that is not finite or out of range, a design over the run cap, and a
    design that can never conclude (fewer blocks than an interval needs at its confidence)."""
    got: dict[tuple[str, ...], int | float] = {}
    for path, spec in CONFIG_NUMBERS.items():
        node: Any = config
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, (int, float)) and not isinstance(node, bool):  # other types: the schema's line
            got[path] = number(node, f"{where} {'.'.join(path)}", spec)
    trials = {p[1]: v for p, v in got.items() if p[0] == "trials" and len(p) == 2}
    if {"blocks", "runs_per_arm", "control_runs", "warmup_runs"} <= trials.keys():
        check_design_size(trials["blocks"], trials["runs_per_arm"], trials["control_runs"], trials["warmup_runs"], f"{where} trials")
    if "blocks" in trials and "confidence" in trials:
        need = stats.min_blocks(trials["confidence"])
        if trials["blocks"] < need:
            raise StallcaseError(f"{where} trials.blocks", f"is {trials['blocks']}: at confidence {trials['confidence']} no interval exists "
                                                           f"below {need} blocks, so the comparison could never conclude; use blocks >= {need}")
