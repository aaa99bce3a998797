"""Multi-rank collective analysis: who waited on whom, from matched communicator and op identities.

    load.py       collectives of every rank (flight recorder, recorder, NCCL kernels)
    match.py      align on (communicator, sequence number); mismatches and culprits
    clocks.py     which ranks' host clocks may be compared, and how well
    attribute.py  per matched op: late rank, wait caused, the late host's activity
    transport.py  NVLink/PCIe as observed by NVML, or `not_observed`
    analyze.py    the `collectives` record (schemas/collectives.schema.json)
    findings.py   per-step `collective_wait` findings for the diagnosis
"""

from .analyze import analyze_collectives
from .findings import collective_wait_findings, steps_from_incidents
from .types import Options

__all__ = ["analyze_collectives", "collective_wait_findings", "steps_from_incidents", "Options"]
