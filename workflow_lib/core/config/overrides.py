"""`--config KEY=VALUE` overrides, read as Snakemake reads them and typed by the schema.

Snakemake parses each `--config` value with int, float, True/False, then YAML's BaseLoader
(snakemake/cli.py `parse_config`), so a nested value (`trials={blocks: 8}`) arrives as the
string "8". The schema says what each key is; a string where the schema accepts no string is
converted to the declared type ("8" -> 8 where an integer is declared, "true" -> true), and
one that does not convert is refused naming the key and the value. Only the values the
overrides set are converted: a quoted "8" in a config file is the user's own spelling.
"""

from __future__ import annotations

import re
from typing import Any

from ..bounds import show
from ..errors import StallcaseError
from .schema import accepts, subschema

_INT = re.compile(r"\A[+-]?[0-9]+\Z")
_NUMBER = re.compile(r"\A[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
# YAML 1.2 core schema spellings (what a YAML file would have read as these values).
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULLS = {"null", "Null", "NULL", "~", ""}
_NO = object()


def parse(items: list[str]) -> dict:
    """`--config` items as `snakemake --config` parses them (its own parser, so the two agree)."""
    if not items:  # nothing to parse: importing snakemake costs 1-2 s, and its SLURM plugin asks
        return {}  # `scontrol show config` at import (10 s where no controller answers)
    from snakemake.cli import parse_config

    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise StallcaseError("--config", f"{item!r} is not KEY=VALUE")
    try:
        return parse_config(items)
    except ValueError as exc:
        raise StallcaseError("--config", str(exc)) from None


def _types(sub: dict) -> list[str]:
    branches = sub.get("oneOf", sub.get("anyOf"))
    if branches:
        return [t for b in branches for t in _types(b)]
    if "const" in sub:
        return [_kind(sub["const"])]
    if "enum" in sub:
        return [_kind(v) for v in sub["enum"]]
    t = sub.get("type")
    return list(t) if isinstance(t, list) else [t] if t else []


def _kind(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}.get(type(v), "object")


def _convert(text: str, types: list[str]) -> Any:
    if not types or "string" in types:
        return text  # a string is accepted (or the schema does not say): left as given
    if "integer" in types and _INT.match(text.strip()):
        return int(text)
    if "number" in types and _NUMBER.match(text.strip()):
        return int(text) if _INT.match(text.strip()) else float(text)
    if "boolean" in types and text in _BOOLS:
        return _BOOLS[text]
    if "null" in types and text in _NULLS:
        return None
    return _NO


def coerce(config: dict, overrides: dict, schema: dict) -> None:
    """Convert, in place in `config`, the string values `overrides` set where the schema declares
    another type. Raises StallcaseError naming the key and the value that does not convert."""
    stack: list[tuple[Any, Any, list]] = [(config, overrides, [])]
    while stack:
        node, over, path = stack.pop()
        items = over.items() if isinstance(over, dict) else enumerate(over) if isinstance(over, list) else ()
        for k, v in items:
            try:
                have = node[k]
            except (KeyError, IndexError, TypeError):
                continue
            where = [*path, k]
            if isinstance(v, (dict, list)):
                stack.append((have, v, where))
            elif isinstance(v, str) and have == v:
                sub = subschema(schema, where)
                got = _convert(v, _types(sub))
                if got is _NO:
                    key = ".".join(str(p) for p in where)
                    raise StallcaseError(f"--config {key}", f"is {show(v)}, which does not convert to what the key accepts: {accepts(sub)}")
                node[k] = got

