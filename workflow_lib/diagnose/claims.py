"""The collectives analysis' findings per step: which steps of which rank waited in a
collective for a slower peer, matched across ranks (the `collectives` stage's record, or the
incident analysed here). checks/collective_wait.py places them on each step's timeline.
"""

from __future__ import annotations

from ..collectives import analyze_collectives, collective_wait_findings, steps_from_incidents
from ..core.incident import Incident


def collective_findings(incident: Incident, analysis: dict | None = None) -> dict:
    """(rank, step_id) -> the cross-rank analysis's collective_wait finding, when collectives of
    two or more ranks are in the incident; empty otherwise (the check then says why not).
    `analysis`: the collectives record the `collectives` rule wrote (else analysed here)."""
    coll = incident.table("collectives")
    if coll.num_rows == 0 or len(set(coll["rank"].to_pylist())) < 2:
        return {}
    analysis = analysis if analysis is not None else analyze_collectives([incident])
    return {(f["rank"], f["step_id"]): f for f in collective_wait_findings(analysis, steps_from_incidents([incident]))}
