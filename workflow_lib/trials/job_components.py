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

ROLE_PREFIX = "role:"
RANK_PREFIX = "rank:"


def is_job(name: str) -> bool:
    return name.startswith((ROLE_PREFIX, RANK_PREFIX))


def split(name: str) -> tuple[str, str, str]:
    """'role:consumer:check:input_starvation' -> ('role', 'consumer', 'check:input_starvation')."""
    kind, who, rest = name.split(":", 2)
    return kind, who, rest


def groups(diagnosis: dict, steps: list[dict]) -> dict[str, list[dict]]:
    """prefix -> the measured steps of that role (or rank)."""
    job = (diagnosis.get("summary") or {}).get("job")
    if not job:
        return {}
    roles = {int(r): v for r, v in (job.get("roles") or {}).items()}
    out: dict[str, list[dict]] = {}
    for st in steps:
        r = st.get("rank")
        if r is None:
            continue
        key = f"{ROLE_PREFIX}{roles[r]}:" if roles else f"{RANK_PREFIX}{r}:"
        if roles and r not in roles:
            continue
        out.setdefault(key, []).append(st)
    return out


def components(diagnosis: dict, steps: list[dict], spans, measure, check, span_means) -> dict[str, float | None]:
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
