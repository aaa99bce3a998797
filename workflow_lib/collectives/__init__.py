"""Multi-rank collective analysis: who waited on whom, and which rank hung the job.

In: results/<incident>/snapshot.json (its tables read back from the store). Out:
results/<incident>/collectives.json (types.py CollectivesRecord, schemas/collectives.schema.json),
which the diagnosis reads. Run by rule `collectives` (rules/collectives.smk) through rule.run.

    load.py       collectives of every rank (flight recorder, recorder, NCCL kernels)
    match.py      align on (communicator, sequence number); per-rank state; mismatches
    culprits.py   hang versus straggler: the ranks that hung the job, in collective order
    clocks.py     which ranks' host clocks may be compared, and how well
    attribute.py  per completed op: late rank, wait caused, the late host's activity
    transport.py  NVLink/PCIe as observed by NVML, or `not_observed`
    analyze.py    the `collectives` record (schemas/collectives.schema.json)
    rule.py       the rule's entry: read the snapshot, analyse, write the record
    findings.py   per-step `collective_wait` findings for the diagnosis

One flight-recorder dump (parse, rows, pg_status counters) is read in
workflow_lib/core/formats/fr_dump.py, shared with capture and the importers.

Imported lazily: the analysis needs pandas, which no caller should pay for by importing
the package.
"""

from __future__ import annotations

_LAZY = {"analyze_collectives": "analyze", "collective_wait_findings": "findings",
         "steps_from_incidents": "findings", "Options": "types"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
