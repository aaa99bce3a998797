"""The configuration's schema: errors in one line (the failing key and what it accepts, not the whole schema).

`check(config, schema_path)` raises ConfigError naming the key path (`trials.blocks`), the
value given, and what the schema accepts there (type, range, choices, its description),
with "did you mean" for an unknown key. Snakemake's own `validate` prints the entire schema
after the first line; the workflow calls this first (config.exit_on_error in rules/common.smk)
and Snakemake's `validate` after it only to fill in defaults. `describe(schema)` lists every key and what it
accepts, for `stallcase doctor`.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import jsonschema

from ..errors import StallcaseError

CONFIG_SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "config.schema.json"


class ConfigError(StallcaseError):
    """The workflow configuration violates schemas/config.schema.json."""


def load_schema(path: str | os.PathLike = CONFIG_SCHEMA) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def accepts(sub: dict) -> str:
    """What a schema node accepts, in words."""
    if "const" in sub:
        return json.dumps(sub["const"])
    if "enum" in sub:
        return "one of " + ", ".join(json.dumps(v) for v in sub["enum"])
    if "oneOf" in sub or "anyOf" in sub:
        return " or ".join(accepts(s) for s in sub.get("oneOf", sub.get("anyOf", [])))
    t = sub.get("type")
    words = " or ".join(t) if isinstance(t, list) else (t or "any value")
    bounds = []
    for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if k in sub:
            bounds.append(f"{op} {sub[k]}")
    if "minItems" in sub:
        bounds.append(f"at least {sub['minItems']} items")
    if "pattern" in sub:
        bounds.append(f"matching {sub['pattern']}")
    if t == "object" and "properties" in sub:
        bounds.append("keys " + ", ".join(sub["properties"]))
    return words + (f" ({', '.join(bounds)})" if bounds else "")


def _props(node: dict) -> dict:
    """A node's properties, or those of its object branch (candidate: "baseline" or an object)."""
    if "properties" in node:
        return node["properties"]
    for branch in node.get("oneOf", node.get("anyOf", [])):
        if "properties" in branch:
            return branch["properties"]
    return {}


def subschema(schema: dict, path) -> dict:
    node = schema
    for part in path:
        if isinstance(part, int):  # a list's item
            node = node.get("items", {}) if isinstance(node.get("items"), dict) else {}
            continue
        props = _props(node)
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    return node


def _message(err: jsonschema.ValidationError, schema: dict) -> str:
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        parent = subschema(schema, path)
        known = list(_props(parent))
        extra = [k for k in err.instance if k not in known] if isinstance(err.instance, dict) else []
        bad = extra[0] if extra else "?"
        close = difflib.get_close_matches(str(bad), known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        where = f"in {_key(path)}" if path else "at the top level"
        return f"unknown key '{_key([*path, bad])}' {where}: {hint}accepted keys: {', '.join(known)}"
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        sub = subschema(schema, [*path, missing])
        return f"missing key '{_key([*path, missing])}': accepts {accepts(sub)}" + (
            f" ({sub['description']})" if sub.get("description") else "")
    sub = subschema(schema, path)
    given = json.dumps(err.instance) if not isinstance(err.instance, (dict, list)) else type(err.instance).__name__
    desc = f" ({sub['description']})" if sub.get("description") else ""
    return f"key '{_key(path)}' is {given}: accepts {accepts(sub) if sub else err.message}{desc}"


def check(config: dict, schema_path: str | os.PathLike = CONFIG_SCHEMA, where: str = "config") -> None:
    """Raise ConfigError (one line) for the first problem in config; defaults are not filled here."""
    schema = load_schema(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), list(map(str, e.absolute_path))))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    raise ConfigError(where, _message(best, schema) + "; `stallcase doctor` lists every key")


def describe(schema: dict | None = None) -> list[str]:
    """Every key of the configuration, what it accepts, its default and description."""
    schema = schema or load_schema()
    out: list[str] = []

    def walk(node: dict, path: list[str], required: set) -> None:
        for k, sub in node.get("properties", {}).items():
            p = [*path, k]
            default = f"; default {json.dumps(sub['default'])}" if "default" in sub else ""
            req = "; required" if k in required else ""
            out.append(f"{_key(p)}: {accepts(sub)}{req}{default}" + (f"\n    {sub['description']}" if sub.get("description") else ""))
            if sub.get("type") == "object" and "properties" in sub:
                walk(sub, p, set(sub.get("required", [])))
            for branch in sub.get("oneOf", []):
                if branch.get("type") == "object" and "properties" in branch:
                    walk(branch, p, set(branch.get("required", [])))

    walk(schema, [], set(schema.get("required", [])))
    return out
