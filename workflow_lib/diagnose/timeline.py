"""Union-on-timeline accounting: explains_ns never double counts.

Findings claim intervals of the step. Walking them in check priority order, each attributed
finding is credited only with the part of its claim not already credited to an earlier one,
so the credited amounts are disjoint, their sum is the union of all claims, and it cannot
exceed the step's wall time. The rest is reported as unexplained.
"""

from __future__ import annotations

from . import measures
from .types import Finding, StepWindow


def resolve(step: StepWindow, findings: list[Finding]) -> tuple[list[dict], int]:
    """Records for the findings (in the given priority order) and the total explained ns."""
    taken = measures.empty()
    out = []
    for f in findings:
        explains = 0
        if f.verdict == "attributed":
            claim = measures.clip(f.claimed, step.start_ns, step.end_ns)
            own = measures.subtract(claim, taken)
            explains = own.total_ns
            evidence = dict(f.evidence)
            if claim.total_ns != explains:
                evidence["claimed_before_overlap_ns"] = claim.total_ns
            taken = measures.union_many(taken, own)
        else:
            evidence = dict(f.evidence)
        out.append({"check": f.check, "verdict": f.verdict, "explains_ns": int(explains),
                    "evidence": evidence, "missing": list(f.missing)})
    return out, taken.total_ns
