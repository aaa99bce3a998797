"""The manifest's per-rank flight-recorder details, checked before the collectives analysis reads them.

The manifest schema keeps `sources.<name>.detail` a free object (each source writes its own),
so the shape of `detail.dumps` (formats/fr_dump.dump_detail writes it) is checked here: a
hand-edited or hostile manifest with `null` where an object belongs, a rank that is not an ASCII
decimal, or a counter that is not an integer is one line naming the manifest and the field,
never an AttributeError deep in the analysis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import bounds
from ..core.errors import InputError

# Sources whose detail may hold `dumps` (the recorder's collectives source, the torch-fr importer).
DUMP_SOURCES = ("collectives", "torch_fr")
_TYPES: dict[str, tuple[type, ...]] = {
    "file": (str, type(None)), "version": (str, type(None)), "comm_lib_version": (str, type(None)),
    "wrapped": (bool,), "wrapped_reason": (str, type(None)), "pending_only": (bool,), "hostname": (str, type(None)),
    "groups": (dict, type(None)), "with_gpu_duration": (bool,), "unmapped_pg_status": (list, type(None)),
}
_COUNTERS = ("last_enqueued", "last_started", "last_completed")


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def dump_details(manifest: dict, where: str | Path) -> dict[str, dict]:
    """rank (decimal text) -> that rank's checked dump detail; the importer's overrides the recorder's."""
    where = Path(where) / "manifest.json"
    out: dict[str, dict] = {}
    for name in DUMP_SOURCES:
        detail = (manifest.get("sources") or {}).get(name, {}).get("detail")
        if detail is None:
            continue
        dumps = detail.get("dumps")
        if dumps is None:
            continue
        field = f"sources.{name}.detail.dumps"
        if not isinstance(dumps, dict):
            raise InputError(where, f"{field} is {_kind(dumps)}, expected an object of rank -> dump detail")
        for rank, d in dumps.items():
            bounds.rank(bounds.decimal_id(rank, f"{field} key", where), f"{field} key", where)
            if d is None:
                continue  # a rank listed without a dump (older imports write this)
            if not isinstance(d, dict):
                raise InputError(where, f"{field}.{rank} is {_kind(d)}, expected an object")
            for key, types in _TYPES.items():
                if key in d and not isinstance(d[key], types):
                    raise InputError(where, f"{field}.{rank}.{key} is {_kind(d[key])}, expected "
                                            + " or ".join("null" if t is type(None) else t.__name__ for t in types))
            if "wrapped_reason" in d and "wrapped" not in d:
                raise InputError(where, f"{field}.{rank} has wrapped_reason but no wrapped")
            for pg, c in (d.get("groups") or {}).items():
                if not isinstance(c, dict):
                    raise InputError(where, f"{field}.{rank}.groups.{pg} is {_kind(c)}, expected an object of counters")
                for k in _COUNTERS:
                    if c.get(k) is not None:
                        bounds.seq(c[k], f"{field}.{rank}.groups.{pg}.{k}", where)
            out[rank] = d
    return out
