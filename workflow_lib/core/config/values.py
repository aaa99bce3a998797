"""Checks on the configuration's values that a JSON Schema cannot express.

A config is the user's own choice (docs/security.md), but it may be copied from
elsewhere, so it must fail in one line rather than hang or write somewhere unexpected:
  - YAML aliases expand under a cap (bounds.MAX_CONFIG_NODES): `files.check_file` counts
    the expansion on the composed node graph, before anything is built from it. Snakemake
    reads `--configfile` itself and merges nested mappings recursively before any workflow
    code runs, so a "billion laughs" of mappings hangs snakemake, not us: run
    `stallcase check-config FILE` on a config you did not write. `check_values` catches the
    alias expansions that do reach the workflow (lists, which snakemake does not walk);
  - every text value is valid Unicode without NUL, naming its key;
  - results_dir and incidents_dir are the user's own choice (trusted input, like a path on
    the command line) and need no `allow_roots`: only paths that come *from an incident*
    (its artifacts, sources and inputs) are confined to declared roots (snapshot.py);
  - a candidate env name is a plain variable name and its value holds no NUL;
  - a stdout metric regex is given, compiles on the linear-time engine and has the group it reads;
  - what a later stage owns but the config alone decides (`STAGE_CHECKS`: plan/metric.py's
    check_config refuses a metric per item/token whose work no run can carry, and a bad
    tokens_per_step expression), before anything runs;
  - (numbers: numbers.check_numbers; types and ranges: schema.check.)
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .. import bounds
from ..errors import InputError, RecordError, StallcaseError
from ..patterns import compile_pattern

_ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")

# Checks of the config's own values that a stage owns (the foundation imports no stage, so the
# stage registers its check when it is imported: plan/metric.py's check_config). Every entry
# that checks a config imports the plan stage first (rules/common.smk, commands/doctor.py).
STAGE_CHECKS: list[Callable[[dict], None]] = []


def register(check: Callable[[dict], None]) -> None:
    """Add a stage's check of trials.metric (RecordError naming the key under config)."""
    if check not in STAGE_CHECKS:
        STAGE_CHECKS.append(check)


def check_values(config: dict) -> None:
    """Raise StallcaseError naming the config key."""
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


def _work_declared(metric) -> None:
    """A metric per item/token must say where each run's work comes from (plan/metric.py and
    plan/work.py decide; what the config alone shows is refused here, before anything runs)."""
    for check in STAGE_CHECKS:
        try:
            check(metric)
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
