"""Per-role and per-rank components of a multi-process run (beside components.py).

A job's run has one diagnosis holding every rank's steps. Its whole-job components
(components.py) mix producers and consumers; these say which part of the job moved:

- `role:<role>:wall`, `role:<role>:check:<name>`, `role:<role>:span:<name>`: the same means
  per step as components.py, over the measured steps of the ranks of that role (when the
  ranks declared roles: their count may differ between arms, e.g. more producers);
- `rank:<r>:wall`, `rank:<r>:check:<name>`: per rank, when no rank declared a role (a
  synchronous job's ranks keep their numbers in both arms).

The comparison estimates each with its own A/A floor, as every component (compare_components.py).
"""

from __future__ import annotations

import numpy as np

ROLE_PREFIX = "role:"
RANK_PREFIX = "rank:"


def is_job(name: str) -> bool:
    return name.startswith((ROLE_PREFIX, RANK_PREFIX))


def split(name: str) -> tuple[str, str, str]:
    """'role:consumer:check:input_starvation' -> ('role', 'consumer', 'check:input_starvation')."""
    kind, who, rest = name.split(":", 2)
    return kind, who, rest


def groups(diagnosis: dict, steps) -> dict[str, object]:
    """prefix -> the measured steps of that role (or rank): components.Measured subsets, in
    the order each group's first measured step comes."""
    job = (diagnosis.get("summary") or {}).get("job")
    if not job:
        return {}
    roles = {int(r): v for r, v in (job.get("roles") or {}).items()}
    rank = steps.col("rank")
    null = rank.is_null().to_numpy(zero_copy_only=False)
    rank = rank.fill_null(-1).to_numpy()
    out: dict[str, object] = {}
    keys = np.array([None if n else (f"{ROLE_PREFIX}{roles[r]}:" if r in roles else None) if roles else f"{RANK_PREFIX}{r}:"
                     for n, r in zip(null.tolist(), rank.tolist())], dtype=object)
    for key in dict.fromkeys(k for k in keys.tolist() if k is not None):  # first-seen order
        out[key] = steps.subset(keys == key)
    return out


def components(diagnosis: dict, steps, spans, measure, check, span_means) -> dict[str, float | None]:
    """The job's per-role (or per-rank) values; `measure`, `check` and `span_means` are
    components.py's own readers, so a part is computed as the whole is."""
    out: dict[str, float | None] = {}
    for prefix, part in groups(diagnosis, steps).items():
        out[prefix + "wall"] = measure(part, "wall_ns")[0]
        for name in diagnosis.get("checks", []):
            out[prefix + "check:" + name] = check(part, name)[0]
        if prefix.startswith(ROLE_PREFIX):
            by_span, _ = span_means(part, spans)
            out.update({prefix + k: v for k, v in by_span.items()})
    return out
