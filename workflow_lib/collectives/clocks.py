"""Which ranks' host timelines can be compared, how, and with what uncertainty.

Each rank is its own clock domain unless something recorded relates it to another:
  same_clock      both ranks ran on one named host on the same clock kind
                  (CLOCK_MONOTONIC and CLOCK_REALTIME are each system-wide): offset 0, +/- 0
  same_host_unix  one named host, different clock kinds: through each manifest's
                  unix_minus_host_ns, +/- Options.same_host_conversion_uncertainty_ns
  ref_clock:NAME  both ranks' incidents hold a `clock_sync` row with source
                  "ref_clock:NAME" (host_ns + offset_ns = NAME's clock, +/- uncertainty_ns),
                  for that rank or for the whole incident; uncertainties add
A rank's host is the hostname given when its dump was imported, else its incident's
(`provenance.hostname`, which the recorder writes). Flight-recorder dumps name no host, so
ranks imported together without one are NOT assumed to share a clock: each is its own
domain (uncertainty null: not comparable), and their host times are never compared.
"""

from __future__ import annotations

from ..core.incident import Incident
from .types import ClockDomain, Options, RankSource

REF_PREFIX = "ref_clock:"


def _refs(inc: Incident, rank: int) -> dict[str, tuple[int, int]]:
    """Best (smallest uncertainty) reference-clock calibration per reference name, for one rank."""
    t = inc.table("clock_sync").to_pandas()
    t = t[t["source"].str.startswith(REF_PREFIX) & (t["rank"].isna() | (t["rank"] == rank))]
    out = {}
    for name, rows in t.groupby("source"):
        best = rows.sort_values("uncertainty_ns").iloc[0]
        out[name[len(REF_PREFIX):]] = (int(best["offset_ns"]), int(best["uncertainty_ns"]))
    return out


def _relate(a: tuple, b: tuple, opts: Options) -> tuple[int, int, str] | None:
    """(offset_ns, uncertainty_ns, how) such that a_ns + offset = b's timeline, or None.

    a, b: (rank, RankSource, Incident, its reference-clock calibrations)."""
    (ra, sa, ia, fa), (rb, sb, ib, fb) = a, b
    ca, cb = ia.manifest["clock"], ib.manifest["clock"]
    if sa.hostname is not None and sa.hostname == sb.hostname:
        if ca["host"] == cb["host"]:
            return 0, 0, "same_clock"
        ua, ub = ca.get("unix_minus_host_ns"), cb.get("unix_minus_host_ns")
        if ua is not None and ub is not None:
            return int(ua) - int(ub), opts.same_host_conversion_uncertainty_ns, "same_host_unix"
    for name in sorted(set(fa) & set(fb)):
        (oa, ea), (ob, eb) = fa[name], fb[name]
        # a + oa = ref = b + ob  ->  a + (oa - ob) = b
        return oa - ob, ea + eb, REF_PREFIX + name
    return None


def domains(incidents: list[Incident], sources: dict[int, RankSource], opts: Options) -> dict[int, ClockDomain]:
    """Place each rank in a comparability group, relative to the group's first rank."""
    by_path = {str(i.path): i for i in incidents}
    out: dict[int, ClockDomain] = {}
    roots: list[tuple[int, tuple]] = []
    for r in sorted(sources):
        inc = by_path[sources[r].incident]
        me = (r, sources[r], inc, _refs(inc, r))
        clock = me[2].manifest["clock"]["host"]
        placed = None
        for gid, root in roots:
            rel = _relate(me, root, opts)
            if rel is not None:
                placed = ClockDomain(me[1].incident, gid, rel[0], rel[1], rel[2], me[1].hostname, clock, r)
                break
        if placed is None:
            gid = len(roots)
            roots.append((gid, me))
            placed = ClockDomain(me[1].incident, gid, 0, 0, "reference", me[1].hostname, clock, r)
        out[r] = placed
    return out
