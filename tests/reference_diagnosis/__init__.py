"""The per-step reference of the diagnosis (issue 37): each check's `describe` on one step at a
time, the claims resolved step by step on the step's own timeline, the summary added up over
step records. The product diagnoses all steps of a rank at once (workflow_lib/diagnose/
columns.py); the equality tests (tests/test_diagnose_batch*.py, tests/diagnose_crosscheck.py)
hold it equal to this, which is the rules as written for one step: simple to read, slow
(~0.5 ms a step).

    diagnose(incident, incident_id=..., snapshot_digest=..., options=..., collectives=...) -> record
    (steps inline, every step's evidence kept)
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from workflow_lib.core.incident_stream import RankedIncident
from workflow_lib.diagnose.engine import gpu_covered
from workflow_lib.diagnose import dump_only as coll_diagnosis
from workflow_lib.diagnose import evidence as evidence_mod
from workflow_lib.diagnose import lead as lead_mod
from workflow_lib.diagnose import excess as excess_mod
from workflow_lib.diagnose import job as job_mod
from workflow_lib.diagnose import measures, next_experiments, places
from workflow_lib.diagnose.checks import warm_up as warmup
from workflow_lib.diagnose.checks import CHECKS, FIRST_AFTER, NAMES, collective_wait
from workflow_lib.diagnose.batch import StepFindings, StepsInput
from workflow_lib.diagnose.checks.base import CheckInput, make_base
from workflow_lib.diagnose.evidence import RankInput
from workflow_lib.diagnose.claims import collective_findings
from workflow_lib.diagnose.record import Sums, diagnosis_record, growth, step_measures, window_record, with_findings
from workflow_lib.diagnose.steps import step_table
from workflow_lib.diagnose.types import FINDING_VERDICTS, DiagnoseOptions, StepWindow


def diagnose(incident, *, incident_id: str, snapshot_digest: str, options: DiagnoseOptions | None = None,
             validate: bool = False, collectives: dict | None = None) -> dict:
    """The diagnosis record, made step by step (every step's evidence kept)."""
    opts = options or DiagnoseOptions()
    if coll_diagnosis.is_dump_only(incident, opts.step_pattern):
        return coll_diagnosis.dump_only_diagnosis(incident, incident_id=incident_id, snapshot_digest=snapshot_digest,
                                                  options=opts, analysis=collectives, validate=validate)
    src = evidence_mod.sources_of(incident)
    steps = step_table(incident, opts.step_pattern)
    origin = int(np.min(steps["start_ns"].to_numpy()))
    wait_re = opts.wait_regex()
    rank_keys = steps["rank_key"].to_numpy()
    step_records, windows, slow = [], [], []
    acc = Sums()
    coll = collective_findings(incident, collectives) or job_mod.collective_span_findings(incident, origin)
    job_ranks = np.unique(rank_keys).size > 1
    for rk in np.unique(rank_keys):
        sel = np.flatnonzero(rank_keys == rk)
        rank_inc = incident.for_rank(int(rk)) if isinstance(incident, RankedIncident) else incident
        ev = evidence_mod.build(rank_inc, int(rk), origin, wait_re)
        pa.default_memory_pool().release_unused()
        starts = steps["start_ns"].to_numpy()[sel] - origin
        ends = steps["end_ns"].to_numpy()[sel] - origin
        ids = steps["step_id"].to_numpy()[sel]
        tids = steps["thread_id"].to_numpy()[sel]
        m = step_measures(ev, starts, ends, src)
        profile = job_mod.span_profile(ev, tids, starts, ends) if job_ranks else None
        cold = warmup.cold_steps(ends - starts, opts)
        windows.append(window_record(ev, int(starts.min()), int(ends.max()), src, origin, opts))
        # GPU activity recorded in windows (capture/gpu_arming.py): a step outside them is read
        # with the rank's sources less kernels and runtime calls, its GPU measures not observed.
        covered = gpu_covered(incident.manifest, src, starts + origin, ends + origin)
        src_off = dataclasses.replace(src, kernels=False, runtime_api=False, gpu_outside_window=True)
        m_off = step_measures(ev, starts, ends, src_off) if covered is not None else None
        owed = lead_mod.owed_of_steps(ev, starts, ends, opts.warmup_steps, covered)
        rank_recs = []
        for i in range(sel.size):
            sw = StepWindow(int(ids[i]), ev.rank, int(tids[i]), int(starts[i]), int(ends[i]))
            on = covered is None or bool(covered[i])
            rank_recs.append(step_record(sw, ev, src if on else src_off, opts, m if on else m_off, i, origin,
                                         coll.get((ev.rank, int(ids[i]))), cold[i], int(owed[i])))
        ref = attach(rank_recs, opts)
        rows = excess_mod.slow_steps(rank_recs, opts.slow_step_factor)
        pos = {r["step_id"]: i for i, r in enumerate(rank_recs)}
        slow.extend(with_findings(growth(rows, pos, ref, ev, starts, ends), dict(enumerate(rank_recs)), pos))
        acc.totals = step_totals(rank_recs, acc.totals)
        next_experiments.totals(rank_recs, acc.experiments)
        acc.job.append(rank_digest(rank_recs))
        step_records.extend(rank_recs)
        if profile is not None and acc.job[-1] is not None:
            acc.job[-1]["span_profile"] = profile
    return diagnosis_record(incident, incident_id, snapshot_digest, opts, step_records, windows, slow, coll, None, acc)


def step_record(sw: StepWindow, ev, src, opts, m: dict, i: int, origin: int, coll: dict | None = None,
                cold: dict | None = None, lead_owed_ns: int = 0) -> dict:
    base = make_base(sw, ev, opts.min_gap_ns)
    ci = CheckInput(sw, base, RankInput(ev, src, opts), cold, lead_owed_ns)
    found = [c.describe(ci) for c in CHECKS]
    if coll is not None:
        # A wait matched across ranks is credited first.
        k = NAMES.index("collective_wait")
        found.pop(k)
        found.insert(0, collective_wait.claim(coll, sw, ev))
    findings, explained = resolve(sw, found)
    if coll is not None and coll["verdict"] == "attributed" and findings[0]["explains_ns"] == 0 and "not placed" in findings[0]["evidence"].get("placement", ""):
        findings[0]["explains_ns"] = int(min(coll["explains_ns"], sw.wall_ns - explained))
        explained += findings[0]["explains_ns"]
    findings.sort(key=lambda f: NAMES.index(f["check"]))
    for f in findings:  # where an attributed finding sits (diagnose/places.py), step by step
        f["at"] = at_of_step(f["check"], ev, sw.start_ns, sw.end_ns, origin) if f["verdict"] == "attributed" else None
    rec = {k: (None if v is None else int(v[i])) for k, v in m.items()}
    g = base.idle if src.kernels else measures.empty()
    rec.update(
        step_id=sw.step_id, rank=sw.rank, thread_id=sw.thread_id,
        start_ns=sw.start_ns + origin, end_ns=sw.end_ns + origin,
        overlap_factor=measures.overlap_factor(rec["kernel_sum_ns"], rec["busy_ns"]) if src.kernels else None,
        gaps={"count": len(g), "total_ns": g.total_ns, "longest": measures.gap_records(g, origin, opts.max_gaps_listed)},
        findings=findings, explained_ns=int(explained), unexplained_ns=int(sw.wall_ns - explained),
    )
    return rec


def resolve(step: StepWindow, findings: list[Finding]) -> tuple[list[dict], int]:
    """Records for the findings (in the given priority order) and the total explained ns."""
    taken = measures.empty()
    out = []
    early: dict[str, int] = {}  # check -> its `first` claims' credit, taken right after FIRST_AFTER
    for f in findings:
        explains = 0
        if f.verdict == "attributed":
            claim = measures.clip(f.claimed, step.start_ns, step.end_ns)
            own = measures.subtract(claim, taken)
            explains = own.total_ns + early.get(f.check, 0)
            evidence = dict(f.evidence)
            if claim.total_ns != explains:
                evidence["claimed_before_overlap_ns"] = claim.total_ns
            taken = measures.union_many(taken, own)
        else:
            evidence = dict(f.evidence)
        out.append({"check": f.check, "verdict": f.verdict, "explains_ns": int(explains),
                    "evidence": evidence, "missing": list(f.missing)})
        if f.check == FIRST_AFTER:
            for g in findings:
                if g.verdict == "attributed" and g.first is not None:
                    first = measures.subtract(measures.clip(g.first, step.start_ns, step.end_ns), taken)
                    early[g.check] = first.total_ns
                    taken = measures.union_many(taken, first)
    return out, taken.total_ns


def attach(records: list[dict], opts) -> dict:
    """Fill records[i]['excess'] and each finding's share_of_excess for one rank's steps (in
    time order). Returns {'typical_ns', 'comparable': indices, 'typical_by_cause'} or {}."""
    n = len(records)
    comp = np.arange(opts.warmup_steps, n)
    for r in records:
        r["excess"] = None
        for f in r["findings"]:
            f["share_of_excess"] = None
    if comp.size < opts.min_comparable_steps:
        return {}
    wall = np.array([r["wall_ns"] for r in records], np.int64)
    typical = int(np.median(wall[comp]))
    causes = sorted({excess_mod.cause_of(f["check"]) for r in records for f in r["findings"]})
    col = {c: k for k, c in enumerate(causes)}
    amt = np.zeros((n, len(causes)), np.int64)
    for i, r in enumerate(records):
        for f in r["findings"]:
            if f["explains_ns"]:
                amt[i, col[excess_mod.cause_of(f["check"])]] += f["explains_ns"]
    typ = np.median(amt[comp], axis=0).astype(np.int64) if causes else np.zeros(0, np.int64)
    growth = np.maximum(amt - typ, 0)
    for i in comp:
        r = records[i]
        excess = int(wall[i] - typical)
        by = {}
        if excess > 0 and causes:
            g = growth[i].astype(float)
            tot = g.sum()
            if tot > excess:
                g = np.floor(g * (excess / tot))
            by = {causes[k]: int(g[k]) for k in range(len(causes)) if g[k] > 0}
        unexplained = max(excess - sum(by.values()), 0) if excess > 0 else 0
        r["excess"] = {"typical_ns": typical, "excess_ns": excess, "by_cause": by, "unexplained_ns": int(unexplained)}
        for f in r["findings"]:
            if excess > 0:
                c = excess_mod.cause_of(f["check"])
                share = by.get(c, 0) / excess
                # Busy time is split over two findings (gpu_bound, gpu_work): credit the one that explains it.
                if c == "gpu_work_growth" and f["explains_ns"] == 0:
                    share = 0.0
                f["share_of_excess"] = round(float(share), 6)
    return {"typical_ns": typical, "comparable": comp, "typical_by_cause": {c: int(typ[k]) for c, k in col.items()}}


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


def rank_digest(step_records: list[dict]) -> dict | None:
    """What the job summary needs from one rank's step records (None for steps without a rank):
    its steps' walls, its attributed time per check, and the span names behind its own top
    cause. Small next to the records: the summary can be made while they go to disk (spool.py)."""
    recs = [r for r in step_records if r.get("rank") is not None]  # validated after: spool.validate
    if not recs:
        return None
    by = {r["step_id"]: r for r in recs}  # the last record of a step id, as summary reads them
    totals: dict[str, int] = {}
    for rec in by.values():
        for f in rec["findings"]:
            if f["verdict"] == "attributed" and f["explains_ns"]:
                totals[f["check"]] = totals.get(f["check"], 0) + int(f["explains_ns"])
    own = {k: v for k, v in totals.items() if k != "collective_wait"}  # a rank's own cause: not its wait for others
    top = max(sorted(own), key=own.get) if own else None
    names: dict[str, int] = {}
    for rec in by.values():
        for f in rec["findings"]:
            if f["check"] == top and f["verdict"] == "attributed":
                for name, ns in (f["evidence"].get("spans") or {}).items():  # name -> ns (checks/base.top_names)
                    names[name] = names.get(name, 0) + int(ns)
    return {"rank": recs[0]["rank"], "walls": {s: int(r["wall_ns"]) for s, r in by.items()},
            "cause": {"check": top, "explains_ns": totals.get(top, 0) if top else 0},
            "spans": [n for n, _ in sorted(names.items(), key=lambda kv: -kv[1])[:job_mod.MAX_LINKED_SPANS]],
            "wait_ns": totals.get("collective_wait", 0)}


def per_step(check_module, si: StepsInput, rank: int | None, keep_evidence: np.ndarray | None = None) -> StepFindings:
    """A check's `describe` run on each step, as a StepFindings: the reference for its
    column rule `check_steps`. Evidence is kept where `keep_evidence` holds."""
    f, n = si.frame, si.frame.n
    verdict = np.zeros(n, np.int8)
    codes = np.zeros(n, np.int32)
    missing: dict[tuple, int] = {(): 0}
    cs, ce, fs, fe = [], [], [], []
    evidence, kinds, spans = {}, {}, {}
    for k in range(n):  # steps: this is the slow path
        sw = StepWindow(int(f.ids[k]), rank, int(f.tids[k]), int(f.starts[k]), int(f.ends[k]))
        owed = int(si.lead_owed[k]) if si.lead_owed is not None else 0
        got = check_module.describe(CheckInput(sw, make_base(sw, si.rank.ev, si.rank.opts.min_gap_ns), si.rank, si.cold[k], owed))
        verdict[k] = FINDING_VERDICTS.index(got.verdict)
        codes[k] = missing.setdefault(tuple(got.missing), len(missing))
        if got.verdict == "attributed":
            c = measures.clip(got.claimed, sw.start_ns, sw.end_ns)
            cs.append(c.start_ns)
            ce.append(c.end_ns)
            if got.first is not None:
                c = measures.clip(got.first, sw.start_ns, sw.end_ns)
                fs.append(c.start_ns)
                fe.append(c.end_ns)
            if "by_kind" in got.evidence:
                kinds[k] = {kind: int(b.get("critical_ns", 0)) for kind, b in got.evidence["by_kind"].items()}
            for name, ns in (got.evidence.get("spans") or {}).items():
                spans[name] = spans.get(name, 0) + int(ns)
        if keep_evidence is not None and keep_evidence[k]:
            evidence[k] = got.evidence
    claimed = measures.union(np.concatenate(cs), np.concatenate(ce)) if cs else measures.empty()
    first = f.pieces(measures.union(np.concatenate(fs), np.concatenate(fe))) if fs else None
    return StepFindings(check_module.NAME, verdict, f.pieces(claimed), list(missing), codes, evidence, kinds, spans, first)


def at_of_step(check: str, ev, lo: int, hi: int, origin: int) -> list[dict] | None:
    """One attributed finding's place in the step [lo, hi) (relative ns): what Placed.of gives
    for it; None for a check without a place of its own or when nothing of it is in the step."""
    if check not in places.PLACED:
        return None
    iv = measures.clip(places.union_of(check, ev), lo, hi)
    keep = iv.end_ns > iv.start_ns
    if not keep.any():
        return None
    return [{"start_ns": int(s) + origin, "end_ns": int(e) + origin}
            for s, e in zip(iv.start_ns[keep].tolist(), iv.end_ns[keep].tolist())]
