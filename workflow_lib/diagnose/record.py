"""The diagnosis record around its steps: the one shape of it (schemas/diagnosis.schema.json),
for an incident with steps (engine.py) and for one of flight-recorder dumps alone (dump_only.py).

What the summary, the next experiments and the job summary add up is summed rank by rank
(`Sums`, from each rank's columns: columns.step_totals, columns.experiments,
columns.rank_digest); the per-step measures and each rank's window are made here too.
"""

from __future__ import annotations

import numpy as np

from ..core.incident import Incident
from . import excess as excess_mod
from . import job as job_mod
from . import measures, next_experiments
from .checks import NAMES
from .checks import warm_up as warmup
from .types import INLINE_STEPS_VERSION, DiagnoseOptions, DiagnosisSummary, Grew, SlowStep, WarmUp


def step_measures(ev, starts, ends, src) -> dict[str, np.ndarray]:
    wall = ends - starts
    busy = measures.covered_between(ev.busy, starts, ends)
    return {
        "wall_ns": wall,
        "kernel_sum_ns": measures.overlap_sum_between(ev.k_start, ev.k_end, starts, ends) if src.kernels else None,
        "busy_ns": busy if src.kernels else None,
        "idle_ns": wall - busy if src.kernels else None,
        "host_api_ns": measures.covered_between(ev.api_union, starts, ends) if src.runtime_api else None,
        "host_sync_api_ns": measures.covered_between(ev.sync_union, starts, ends) if src.runtime_api else None,
    }


def _at(arr, i):
    return None if arr is None else int(arr[i])


def window_record(ev, lo: int, hi: int, src, origin: int, opts: DiagnoseOptions) -> dict:
    m = step_measures(ev, np.array([lo]), np.array([hi]), src)
    g = measures.gaps(ev.busy, lo, hi) if src.kernels else measures.empty()
    rec = {k: _at(v, 0) for k, v in m.items()}
    rec.update(rank=ev.rank, start_ns=lo + origin, end_ns=hi + origin,
               overlap_factor=measures.overlap_factor(rec["kernel_sum_ns"] or 0, rec["busy_ns"] or 0) if src.kernels else None,
               gaps={"count": len(g), "total_ns": g.total_ns, "longest": measures.gap_records(g, origin, opts.max_gaps_listed)},
               devices=list(ev.devices))
    return rec


def empty_totals() -> dict:
    """What the summary adds up over the steps, before the first rank (columns.step_totals adds to it)."""
    return {"steps": 0, "wall_ns": 0, "explained_ns": 0, "unexplained_ns": 0,
            "by_check": {n: {"attributed_steps": 0, "unresolved_steps": 0, "not_applicable_steps": 0, "explains_ns": 0}
                         for n in NAMES},
            "warm_up": warmup.totals([])}


class Sums:
    """What the summary, the next experiments and the job summary add up over the steps, rank
    by rank (rank by rank gives what all steps at once give)."""

    def __init__(self):
        self.totals: dict = empty_totals()
        self.experiments = next_experiments.totals([])
        self.job: list[dict | None] = []  # columns.rank_digest of each rank


def diagnosis_record(incident: Incident, incident_id: str, snapshot_digest: str, opts: DiagnoseOptions,
                     steps: list[dict], windows: list[dict], slow: list[SlowStep] | None, coll: dict | None = None,
                     spool=None, acc: "Sums | None" = None) -> dict:
    """The diagnosis record around its steps: the one shape of it, also for dump-only incidents
    (`acc`: the sums made rank by rank, columns.step_totals and its kin; with a spool the
    steps are in its tables, not in the record). The summary is made as its frozen class
    (types.DiagnosisSummary, the one readers get from stored.summary_of) and stored as its JSON."""
    acc = acc if acc is not None else Sums()
    job = job_mod.summary_of(incident, acc.job, opts.wait_regex(), coll)
    summary = summary_of(acc.totals, windows, slow, job)
    experiments = next_experiments.ranked(acc.experiments)
    return {
        "schema_version": INLINE_STEPS_VERSION,
        "kind": "diagnosis",
        "incident_id": incident_id,
        "snapshot_digest": snapshot_digest,
        "options": opts.as_record(),
        "sources": {name: {"status": s["status"], "reason": s["reason"]}  # both required (incident_manifest schema)
                    for name, s in sorted(incident.manifest["sources"].items())},
        "checks": list(NAMES),
        **({"steps": steps} if spool is None else {}),
        "summary": summary.to_json(),
        "next_experiments": job_mod.experiments(job, experiments),
    }


def growth(rows: list[dict], pos: dict, ref: dict, ev, starts, ends) -> list[dict]:
    """This rank's slow steps (excess.slow_steps), each naming the kernels and host spans whose
    time grew; `pos` maps a step id to its row in the rank's steps."""
    if not rows or not ref:
        return rows
    idx = np.array([pos[r["step_id"]] for r in rows], np.int64)
    comp = ref["comparable"]
    k = excess_mod.grew(starts, ends, ev.k_name.codes, ev.k_name.dictionary, ev.k_start, ev.k_end, idx, comp)
    h = excess_mod.grew(starts, ends, ev.span_name.codes, ev.span_name.dictionary, ev.span_start, ev.span_end, idx, comp)
    for r, kk, hh in zip(rows, k, h):
        r["grew"] = {"kernels_ns": kk, "host_spans_ns": hh}
    return rows


def with_findings(rows: list[dict], recs: dict, pos: dict) -> list[SlowStep]:
    """The slow steps with their findings in full, as the summary's frozen class: the report's
    first screen reads them from the record, never from the tables (whose evidence may be kept
    for these steps only). `recs`: row -> step record (at least the slow ones); `pos`: step id -> row."""
    return [SlowStep(**dict(r, findings=recs[pos[r["step_id"]]]["findings"],
                            **({"grew": Grew(**r["grew"])} if "grew" in r else {})))
            for r in rows]


def summary_of(totals: dict, windows: list[dict], slow: list[SlowStep] | None = None,
               job: dict | None = None) -> DiagnosisSummary:
    """The record's summary from what was added up over the steps (`job`: job.summary_of's,
    None for one process)."""
    warm = warmup.summary_of(totals["warm_up"])
    return DiagnosisSummary(
        steps=totals["steps"], wall_ns=totals["wall_ns"], explained_ns=totals["explained_ns"],
        unexplained_ns=totals["unexplained_ns"], by_check=totals["by_check"], windows=windows,
        slow_steps=sorted(slow or [], key=lambda s: -s.excess_ns)[:excess_mod.MAX_SLOW_LISTED],
        **({"warm_up": WarmUp(**warm)} if warm is not None else {}),
        **({"job": job} if job is not None else {}))
