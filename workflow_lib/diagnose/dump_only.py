"""A diagnosis of an incident that holds only collectives (flight-recorder dumps, no steps).

Without steps there is nothing per step to measure, but the dumps still say which rank
hung the job: the diagnosis record then has no steps and carries the collectives
analysis' verdict under `collectives` (hung_on, culprits, counts). With a collectives
record already written (the `collectives` rule), it is read instead of re-analysed.
"""

from __future__ import annotations

from ..core import records
from ..core.incident import Incident
from .record import diagnosis_record  # the diagnosis' own shape, zero steps

CULPRITS_LISTED = 20


def is_dump_only(incident: Incident, step_pattern: str | None) -> bool:
    """No steps to diagnose, but collectives to analyse."""
    return step_pattern is None and incident.table("steps").num_rows == 0 and incident.table("collectives").num_rows > 0


def verdict(analysis: dict) -> dict:
    """The part of a collectives record a diagnosis carries (schema: diagnosis.collectives).
    `analysis`: version 2 (made here, or read by the rule through records.upgrade, which refuses
    version 1), which requires hung_on and culprits."""
    s = analysis["summary"]
    return {
        "hung_on": analysis["hung_on"],
        "culprits": [{k: c[k] for k in ("rank", "kind", "comm", "seq", "op", "evidence", "missing")}
                     for c in analysis["culprits"][:CULPRITS_LISTED]],
        "culprits_total": len(analysis["culprits"]),
        "ops": s["ops"], "attributed": s["attributed"], "pending": s.get("pending", 0),
        "ranks": sorted(int(r) for r in analysis["ranks"]),
    }


def dump_only_diagnosis(incident: Incident, *, incident_id: str, snapshot_digest: str, options,
                        analysis: dict | None = None, validate: bool = True) -> dict:
    """The diagnosis record of a dump-only incident: no steps, the collectives verdict."""
    from ..collectives.analyze import analyze_collectives

    if analysis is None:
        analysis = analyze_collectives([incident])
    record = dict(diagnosis_record(incident, incident_id, snapshot_digest, options, [], [], None),
                  collectives=verdict(analysis))
    if validate:
        records.validate(record, "diagnosis")
    return record
