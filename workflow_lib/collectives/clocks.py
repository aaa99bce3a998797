"""Which incidents' host timelines can be compared, how, and with what uncertainty.

Host times of different ranks are compared only through something recorded:
  same_clock      one incident, or incidents of one host on the same clock kind
                  (CLOCK_MONOTONIC and CLOCK_REALTIME are each system-wide): offset 0, +/- 0
  same_host_unix  one host, different clock kinds: through each manifest's
                  unix_minus_host_ns, +/- Options.same_host_conversion_uncertainty_ns
  ref_clock:NAME  both incidents hold a `clock_sync` row with source "ref_clock:NAME"
                  (host_ns + offset_ns = NAME's clock, +/- uncertainty_ns), e.g. measured
                  by a ping-pong against rank 0; uncertainties add
Otherwise incidents are in different groups and their host times are never compared.
An incident without a hostname is only comparable with itself or through ref_clock.
"""

from __future__ import annotations

from ..incident import Incident
from .types import ClockDomain, Options

REF_PREFIX = "ref_clock:"


def _hostname(inc: Incident) -> str | None:
    return (inc.manifest.get("provenance") or {}).get("hostname")


def _refs(inc: Incident) -> dict[str, tuple[int, int]]:
    """Best (smallest uncertainty) reference-clock calibration per reference name."""
    t = inc.table("clock_sync").to_pandas()
    t = t[t["source"].str.startswith(REF_PREFIX)]
    out = {}
    for name, rows in t.groupby("source"):
        best = rows.sort_values("uncertainty_ns").iloc[0]
        out[name[len(REF_PREFIX):]] = (int(best["offset_ns"]), int(best["uncertainty_ns"]))
    return out


def _relate(a: Incident, b: Incident, opts: Options) -> tuple[int, int, str] | None:
    """(offset_ns, uncertainty_ns, how) such that a_ns + offset = b's timeline, or None."""
    ha, hb = _hostname(a), _hostname(b)
    ca, cb = a.manifest["clock"], b.manifest["clock"]
    if ha is not None and ha == hb:
        if ca["host"] == cb["host"]:
            return 0, 0, "same_clock"
        ua, ub = ca.get("unix_minus_host_ns"), cb.get("unix_minus_host_ns")
        if ua is not None and ub is not None:
            return int(ua) - int(ub), opts.same_host_conversion_uncertainty_ns, "same_host_unix"
    ra, rb = _refs(a), _refs(b)
    for name in sorted(set(ra) & set(rb)):
        (oa, ea), (ob, eb) = ra[name], rb[name]
        # a + oa = ref = b + ob  ->  a + (oa - ob) = b
        return oa - ob, ea + eb, REF_PREFIX + name
    return None


def domains(incidents: list[Incident], opts: Options) -> dict[str, ClockDomain]:
    """Place each incident in a comparability group, relative to the group's first incident."""
    out: dict[str, ClockDomain] = {}
    roots: list[tuple[int, Incident]] = []
    for inc in incidents:
        key = str(inc.path)
        placed = None
        for gid, root in roots:
            rel = _relate(inc, root, opts)
            if rel is not None:
                placed = ClockDomain(key, gid, rel[0], rel[1], rel[2], _hostname(inc), inc.manifest["clock"]["host"])
                break
        if placed is None:
            gid = len(roots)
            roots.append((gid, inc))
            placed = ClockDomain(key, gid, 0, 0, "reference", _hostname(inc), inc.manifest["clock"]["host"])
        out[key] = placed
    return out
