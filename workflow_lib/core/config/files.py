"""A config file before anyone reads it: a regular file of UTF-8 text whose YAML aliases stay small.

Snakemake reads `--configfile` itself and merges nested mappings before any workflow code runs,
so an alias bomb of mappings would hang snakemake: `stallcase check-config FILE` runs this first.
"""

from __future__ import annotations

import os

from .. import bounds, safe_io
from ..errors import InputError


def check_file(path: str | os.PathLike) -> None:
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
