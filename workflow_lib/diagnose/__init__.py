"""Diagnosis: per-step measures kept apart (wall, kernel sum, GPU busy, idle gaps, host API
time) and checks that attribute a delay only with the evidence the attribution needs.

    diagnose(incident, incident_id=..., snapshot_digest=..., options=DiagnoseOptions()) -> record
    diagnose_dir(incident_dir, options=...) -> record  (snapshot_digest: its snapshot record's, snapshot/build.py)
    diagnose_to_file(incident_dir, out_path) -> record written (memory of one rank; spool.py)
    load_diagnosis(path) -> Diagnosis  (stored.py: the record and its per-step tables)

diagnose() returns the record with its steps inline (schema version 2's shape); every writer
stores it as version 3, the steps as two Parquet tables beside the record (step_tables.py,
stored.write_diagnosis). The record validates against schemas/diagnosis.schema.json.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pyarrow as pa

from ..core import records
from ..core.incident import Incident
from ..core.incident_stream import RankedIncident, read_incident_by_rank
from ..capture.sources.cupti import covered_steps
from ..snapshot import build as snapshot_build
from . import evidence as evidence_mod
from . import excess as excess_mod
from . import job as job_mod
from . import columns, measures, next_experiments, timeline, warmup
from .batch import StepFrame
from .checks import CHECKS, NAMES
from .checks.base import CheckInput, make_base
from .steps import step_table
from .stored import Diagnosis, as_diagnosis, load_diagnosis, table_paths, write_diagnosis
from .types import INLINE_STEPS_VERSION, DiagnoseOptions, Finding, Intervals, StepWindow

__all__ = ["diagnose", "diagnose_dir", "diagnose_to_file", "DiagnoseOptions", "NAMES", "Diagnosis", "load_diagnosis",
           "as_diagnosis", "write_diagnosis", "table_paths"]

# Above this many steps in an incident the checks run over all steps of a rank at once
# (columns.py): per step, ~15 checks of ~10 NumPy calls each cost 0.4-0.6 ms a step, 1.2 s at
# 2,000 steps (docs/benchmarks.md, issue 26). Up to it the per-step path keeps every step's
# evidence; above it the evidence is kept for the steps a reader opens first (warm-up, slow).
BATCH_ABOVE = 2_000


def _step_measures(ev, starts, ends, src) -> dict[str, np.ndarray]:
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


def _gpu_covered(manifest: dict, src, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray | None:
    """Per step, whether it lies inside a window of recorded GPU activity; None when every
    step shares the rank's sources (no kernels at all, CUPTI always on, or all covered)."""
    if not src.kernels:
        return None
    detail = ((manifest.get("sources") or {}).get("cupti") or {}).get("detail") or {}
    if detail.get("windows") is None:
        return None
    cov = covered_steps(manifest, start_ns, end_ns)
    return None if cov.all() else cov


def _at(arr, i):
    return None if arr is None else int(arr[i])


def _window_record(ev, lo: int, hi: int, src, origin: int, opts: DiagnoseOptions) -> dict:
    m = _step_measures(ev, np.array([lo]), np.array([hi]), src)
    g = measures.gaps(ev.busy, lo, hi) if src.kernels else measures.empty()
    rec = {k: _at(v, 0) for k, v in m.items()}
    rec.update(rank=ev.rank, start_ns=lo + origin, end_ns=hi + origin,
               overlap_factor=measures.overlap_factor(rec["kernel_sum_ns"] or 0, rec["busy_ns"] or 0) if src.kernels else None,
               gaps={"count": len(g), "total_ns": g.total_ns, "longest": measures.gap_records(g, origin, opts.max_gaps_listed)},
               devices=list(ev.devices))
    return rec


def diagnose(incident: Incident, *, incident_id: str, snapshot_digest: str, options: DiagnoseOptions | None = None,
             validate: bool = True, collectives: dict | None = None, spool=None, batch: bool | None = None) -> dict:
    """Diagnose every step of every rank; returns a diagnosis record (validated unless the
    caller writes it with stored.write_diagnosis, which validates anyway). With a
    spool.StepSpool, each rank's steps go to its tables as the rank is done and the record has
    no `steps` (write it with spool.write_spooled). `batch`: all steps of a rank at once
    (diagnose/columns.py) or step by step; by default batched above BATCH_ABOVE steps (the same
    verdicts and explains either way)."""
    opts = options or DiagnoseOptions()
    from . import dump_only as coll_diagnosis

    if coll_diagnosis.is_dump_only(incident, opts.step_pattern):  # flight-recorder dumps alone: who hung the job
        return coll_diagnosis.dump_only_diagnosis(incident, incident_id=incident_id, snapshot_digest=snapshot_digest,
                                                  options=opts, analysis=collectives, validate=validate)
    src = evidence_mod.sources_of(incident)
    steps = step_table(incident, opts.step_pattern)
    origin = int(np.min(steps["start_ns"].to_numpy()))
    wait_re = opts.wait_regex()
    rank_keys = steps["rank_key"].to_numpy()
    step_records, windows, slow = [], [], []
    acc = Sums()
    # Collective waits: the flight recorder's matched ops when there are any, else the
    # collectives' host spans matched across ranks (job.py).
    coll = _collective_findings(incident, collectives) or job_mod.collective_span_findings(incident, origin)
    job_ranks = np.unique(rank_keys).size > 1  # only a job's ranks are read against each other (job.py)
    for rk in np.unique(rank_keys):  # ranks are few
        sel = np.flatnonzero(rank_keys == rk)
        # A RankedIncident reads one rank's rows here and lets them go after the rank is done.
        rank_inc = incident.for_rank(int(rk)) if isinstance(incident, RankedIncident) else incident
        ev = evidence_mod.build(rank_inc, int(rk), origin, wait_re)
        del rank_inc
        # The rank's Arrow tables are in NumPy arrays now; what Arrow's allocator kept of them
        # would stay in the process (NumPy allocates elsewhere) as the checks run.
        pa.default_memory_pool().release_unused()
        starts = steps["start_ns"].to_numpy()[sel] - origin
        ends = steps["end_ns"].to_numpy()[sel] - origin
        ids = steps["step_id"].to_numpy()[sel]
        tids = steps["thread_id"].to_numpy()[sel]
        m = _step_measures(ev, starts, ends, src)
        # CUPTI armed in windows (capture/gpu.py): a step outside them is read as a rank
        # without GPU evidence ("kernels not observed"), never as a step with an idle GPU.
        covered = _gpu_covered(incident.manifest, src, starts + origin, ends + origin)
        src_off = m_off = None
        if covered is not None:
            src_off = dataclasses.replace(src, kernels=False, runtime_api=False)
            m_off = _step_measures(ev, starts, ends, src_off)
        # A job's ranks are read against each other by what their steps spend in each span (job.py).
        profile = job_mod.span_profile(ev, tids, starts, ends) if job_ranks else None
        cold = warmup.cold_steps(ends - starts, opts)
        windows.append(_window_record(ev, int(starts.min()), int(ends.max()), src, origin, opts))

        def step_record(i: int) -> dict:
            sw = StepWindow(int(ids[i]), ev.rank, int(tids[i]), int(starts[i]), int(ends[i]))
            if covered is not None and not covered[i]:
                return _step_record(sw, ev, src_off, opts, m_off, i, origin, coll.get((ev.rank, int(ids[i]))), cold[i])
            return _step_record(sw, ev, src, opts, m, i, origin, coll.get((ev.rank, int(ids[i]))), cold[i])

        # The batched checks take one set of sources per rank: partly covered ranks go step by step.
        if (covered is None and (batch if batch is not None else steps.num_rows > BATCH_ABOVE)
                and StepFrame.disjoint(starts, ends)):
            cols = columns.diagnose_rank(ev, StepFrame(ids, tids, starts, ends), src, opts, m, cold, origin, coll, step_record)
            rows = excess_mod.slow_steps([cols.detail[k] for k in sorted(cols.detail)], opts.slow_step_factor)
            pos = {int(ids[k]): k for k in cols.detail}
            slow.extend(_with_findings(_growth(rows, pos, cols.excess, ev, starts, ends), cols.detail, pos))
            acc.totals = columns.step_totals(cols, acc.totals)
            columns.experiments(cols, acc.experiments)
            acc.job.append(columns.rank_digest(cols))
            ev = m = None  # the rank's evidence is not needed for its tables: let it go first
            if spool is None:
                step_records.extend(columns.step_dict(cols, k) for k in range(sel.size))
            else:
                for pair in columns.tables(cols):
                    spool.add_tables(*pair)
            del cols
        else:
            rank_recs = [step_record(i) for i in range(sel.size)]  # steps, not events
            ref = excess_mod.attach(rank_recs, opts)
            rows = excess_mod.slow_steps(rank_recs, opts.slow_step_factor)
            pos = {r["step_id"]: i for i, r in enumerate(rank_recs)}
            slow.extend(_with_findings(_growth(rows, pos, ref, ev, starts, ends), dict(enumerate(rank_recs)), pos))
            acc.add(rank_recs)
            if spool is None:
                step_records.extend(rank_recs)
            else:
                spool.add(rank_recs)
            del rank_recs
        if profile is not None and acc.job[-1] is not None:
            acc.job[-1]["span_profile"] = profile
        ev = m = None  # before the next rank's evidence is built
    record = diagnosis_record(incident, incident_id, snapshot_digest, opts, step_records, windows, slow, coll, spool, acc)
    if validate and spool is None:
        records.validate(record, "diagnosis")
    elif validate:
        spool.validate(record)  # its steps were checked row by row as they went to the tables
    return record


class Sums:
    """What the summary, the next experiments and the job summary add up over the steps, rank
    by rank (rank by rank gives what all steps at once give)."""

    def __init__(self):
        self.totals: dict | None = None
        self.experiments = next_experiments.totals([])
        self.job: list[dict | None] = []  # job.rank_digest of each rank

    def add(self, steps: list[dict]) -> None:
        """One rank's step records."""
        self.totals = step_totals(steps, self.totals)
        next_experiments.totals(steps, self.experiments)
        self.job.append(job_mod.rank_digest(steps))


def diagnosis_record(incident: Incident, incident_id: str, snapshot_digest: str, opts: DiagnoseOptions,
                     steps: list[dict], windows: list[dict], slow: list[dict] | None, coll: dict | None = None,
                     spool=None, acc: Sums | None = None) -> dict:
    """The diagnosis record around its steps: the one shape of it, also for dump-only incidents
    (`acc`: the sums made rank by rank; without it they are made from `steps`; with a spool
    the steps come from it)."""
    if acc is None:
        acc = Sums()
        acc.add(steps)
        acc.job = [job_mod.rank_digest([s for s in steps if s["rank"] == r]) for r in dict.fromkeys(s["rank"] for s in steps if s["rank"] is not None)]
    summary = _summary_of(acc.totals, windows, slow)
    job = job_mod.summary_of(incident, acc.job, opts.wait_regex(), coll)
    experiments = next_experiments.ranked(acc.experiments)
    if job is not None:
        summary["job"] = job
    return {
        "schema_version": INLINE_STEPS_VERSION,
        "kind": "diagnosis",
        "incident_id": incident_id,
        "snapshot_digest": snapshot_digest,
        "options": opts.as_record(),
        "sources": {name: {"status": s.get("status"), "reason": s.get("reason")}
                    for name, s in sorted(incident.manifest.get("sources", {}).items())},
        "checks": list(NAMES),
        **({"steps": steps} if spool is None else {}),
        "summary": summary,
        "next_experiments": job_mod.experiments(job, experiments),
    }


def _collective_findings(incident: Incident, analysis: dict | None = None) -> dict:
    """(rank, step_id) -> the cross-rank analysis's collective_wait finding, when collectives of
    two or more ranks are in the incident; empty otherwise (the check then says why not).
    `analysis`: the collectives record the `collectives` rule wrote (else analysed here)."""
    coll = incident.table("collectives")
    if coll.num_rows == 0 or len(set(coll["rank"].to_pylist())) < 2:
        return {}
    from ..collectives import analyze_collectives, collective_wait_findings, steps_from_incidents

    analysis = analysis if analysis is not None else analyze_collectives([incident])
    return {(f["rank"], f["step_id"]): f for f in collective_wait_findings(analysis, steps_from_incidents([incident]))}


def _collective_claim(f: dict, sw: StepWindow, ev) -> Finding:
    """The analysis's finding as a claim on this step's timeline.

    A peer's late arrival keeps this rank's NCCL kernel spinning: the wait is the first
    `wait_ns` of the step's NCCL kernel time, where NCCL kernels were observed. Without
    them the wait cannot be placed, so it is credited last, to time no other check took.
    """
    if f["verdict"] != "attributed":
        return Finding("collective_wait", f["verdict"], measures.empty(), {"ops": f["evidence"]}, tuple(f["missing"]))
    wait = int(f["explains_ns"])
    evidence = {"wait_ns": wait, "ops": f["evidence"]}
    if f.get("placed"):  # matched from the collectives' host spans: the wait is on those spans
        lo, hi = (np.array(x, np.int64) for x in zip(*f["placed"]))
        evidence["placement"] = "the collective's host span, from this rank's arrival to the last rank's"
        evidence["waited_for_ranks"] = sorted({e["waited_for_rank"] for e in f["evidence"]})
        return Finding("collective_wait", "attributed", measures.union(lo, hi), evidence, ())
    nccl = measures.clip(ev.nccl_union, sw.start_ns, sw.end_ns)
    if nccl.total_ns == 0:
        evidence["placement"] = "not placed: no NCCL kernels observed; credited only with time no other check explained"
        return Finding("collective_wait", "attributed", measures.empty(), evidence, ())
    lengths = nccl.end_ns - nccl.start_ns
    before = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    take = np.clip(wait - before, 0, lengths)
    keep = take > 0
    evidence["placement"] = "first wait_ns of the step's NCCL kernel time"
    return Finding("collective_wait", "attributed", Intervals(nccl.start_ns[keep], nccl.start_ns[keep] + take[keep]), evidence, ())


def _step_record(sw: StepWindow, ev, src, opts, m: dict, i: int, origin: int, coll: dict | None = None,
                 cold: dict | None = None) -> dict:
    base = make_base(sw, ev, opts.min_gap_ns)
    ci = CheckInput(sw, base, ev, src, opts, cold)
    found = [c.check(ci) for c in CHECKS]
    if coll is not None:
        # A wait matched across ranks by communicator and sequence number names the cause of
        # the time a sync or a busy GPU also shows: it is credited first.
        k = NAMES.index("collective_wait")
        found.pop(k)
        found.insert(0, _collective_claim(coll, sw, ev))
    findings, explained = timeline.resolve(sw, found)
    if coll is not None and coll["verdict"] == "attributed" and findings[0]["explains_ns"] == 0 and "not placed" in findings[0]["evidence"].get("placement", ""):
        findings[0]["explains_ns"] = int(min(coll["explains_ns"], sw.wall_ns - explained))
        explained += findings[0]["explains_ns"]
    findings.sort(key=lambda f: NAMES.index(f["check"]))
    rec = {k: _at(v, i) for k, v in m.items()}
    g = base.idle if src.kernels else measures.empty()
    rec.update(
        step_id=sw.step_id, rank=sw.rank, thread_id=sw.thread_id,
        start_ns=sw.start_ns + origin, end_ns=sw.end_ns + origin,
        overlap_factor=measures.overlap_factor(rec["kernel_sum_ns"], rec["busy_ns"]) if src.kernels else None,
        gaps={"count": len(g), "total_ns": g.total_ns, "longest": measures.gap_records(g, origin, opts.max_gaps_listed)},
        findings=findings, explained_ns=int(explained), unexplained_ns=int(sw.wall_ns - explained),
    )
    return rec


def _growth(rows: list[dict], pos: dict, ref: dict, ev, starts, ends) -> list[dict]:
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


def _with_findings(rows: list[dict], recs: dict, pos: dict) -> list[dict]:
    """The slow steps with their findings in full: the report's first screen reads them
    from the record, never from the tables (whose evidence may be kept for these steps only).
    `recs`: row -> step record (at least the slow ones); `pos`: step id -> row."""
    for r in rows:
        r["findings"] = recs[pos[r["step_id"]]]["findings"]
    return rows


def _summary(steps: list[dict], windows: list[dict], slow: list[dict] | None = None) -> dict:
    return _summary_of(step_totals(steps), windows, slow)


def step_totals(steps: list[dict], into: dict | None = None) -> dict:
    """What the summary adds up over steps, added to `into` (rank by rank = all at once)."""
    t = into if into is not None else {
        "steps": 0, "wall_ns": 0, "explained_ns": 0, "unexplained_ns": 0,
        "by_check": {n: {"attributed_steps": 0, "unresolved_steps": 0, "not_applicable_steps": 0, "explains_ns": 0}
                     for n in NAMES},
        "warm_up": None}
    t["warm_up"] = warmup.totals(steps, t["warm_up"])
    by_check = t["by_check"]
    for st in steps:
        for f in st["findings"]:
            b = by_check[f["check"]]
            b[f"{f['verdict']}_steps"] += 1
            b["explains_ns"] += f["explains_ns"]
    t["steps"] += len(steps)
    t["wall_ns"] += sum(s["wall_ns"] for s in steps)
    t["explained_ns"] += sum(s["explained_ns"] for s in steps)
    t["unexplained_ns"] += sum(s["unexplained_ns"] for s in steps)
    return t


def _summary_of(totals: dict, windows: list[dict], slow: list[dict] | None = None) -> dict:
    out = {
        "steps": totals["steps"],
        "wall_ns": totals["wall_ns"],
        "explained_ns": totals["explained_ns"],
        "unexplained_ns": totals["unexplained_ns"],
        "by_check": totals["by_check"],
        "windows": windows,
        "slow_steps": sorted(slow or [], key=lambda s: -s["excess_ns"])[:excess_mod.MAX_SLOW_LISTED],
    }
    warm = warmup.summary_of(totals["warm_up"])
    if warm is not None:
        out["warm_up"] = warm
    return out


def diagnose_dir(incident_dir: str | os.PathLike, *, options: DiagnoseOptions | None = None,
                 out_path: str | os.PathLike | None = None) -> dict:
    """Read an incident directory, diagnose it, and (if out_path) write the record and its
    tables atomically (stored.write_diagnosis). Returns the record with its steps inline."""
    inc = read_incident_by_rank(incident_dir)  # rank by rank: memory follows one rank's rows
    record = diagnose(inc, incident_id=inc.manifest["incident_id"], snapshot_digest=snapshot_build.snapshot_digest(incident_dir, inc.manifest), options=options,
                      validate=out_path is None)
    if out_path is not None:
        write_diagnosis(out_path, record)
    return record


def diagnose_to_file(incident_dir: str | os.PathLike, out_path: str | os.PathLike, *,
                     options: DiagnoseOptions | None = None) -> dict:
    """diagnose_dir(out_path=...) in memory bounded by one rank: the incident's tables are read
    rank by rank and the steps go to the diagnosis' tables as each rank is done (spool.py).
    The files are the same; returns the record written (its steps are in the tables)."""
    inc = read_incident_by_rank(incident_dir)
    return _written(inc, out_path, incident_id=inc.manifest["incident_id"],
                    snapshot_digest=snapshot_build.snapshot_digest(incident_dir, inc.manifest), options=options)


def diagnose_snapshot_file(snapshot_path: str | os.PathLike, store_root: str | os.PathLike, out_path: str | os.PathLike,
                           *, options: DiagnoseOptions | None = None, settings: dict | None = None,
                           collectives_path: str | os.PathLike | None = None) -> dict:
    """Rule entry: diagnose a snapshot record's tables (read back from the store, verified),
    with the `collectives` rule's record when given (not re-analysed here). `settings` is the
    workflow's `diagnose:` config section (schema-checked by the workflow)."""
    from ..snapshot.build import load_tables

    if options is None and settings:
        options = DiagnoseOptions.from_config(settings)
    snap = records.read_record(snapshot_path, "snapshot")
    inc = load_tables(snap, store_root)
    coll = records.read_record(collectives_path, "collectives") if collectives_path is not None else None
    return _written(inc, out_path, incident_id=snap["incident_id"], snapshot_digest=records.digest_of(snap), options=options,
                    collectives=coll)


def _written(inc, out_path, **kw) -> dict:
    """diagnose() into its files: each rank's steps to the tables as the rank is done (spool.py),
    the record last, validated once. Returns the record written."""
    from .spool import StepSpool, write_spooled

    with StepSpool(out_path) as spool:
        record = diagnose(inc, **kw, validate=False, spool=spool)
        if "steps" in record:  # dump-only: the record was built without the spool
            return write_diagnosis(out_path, record)
        return write_spooled(out_path, record, spool)
