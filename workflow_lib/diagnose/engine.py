"""The diagnosis of an incident's steps: rank by rank, every step of a rank at once.

    diagnose(incident, incident_id=..., snapshot_digest=..., options=..., collectives=..., spool=...) -> record

Per rank: the rank's evidence (evidence.py), the per-step measures and warm-up steps, all
checks over all steps (columns.diagnose_rank), the slow steps with what grew, and the sums
of the summary (record.Sums); then the record (record.diagnosis_record). With a
spool.StepSpool each rank's steps go to the tables as the rank is done.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..capture.sources.cupti import covered_steps
from ..core import records
from ..core.incident import Incident
from ..core.incident_stream import RankedIncident
from . import dump_only as coll_diagnosis
from . import evidence as evidence_mod
from . import excess as excess_mod
from . import job as job_mod
from . import columns
from .batch import StepFrame
from .checks import warm_up as warmup
from .claims import collective_findings
from .record import Sums, diagnosis_record, growth, step_measures, window_record, with_findings
from .steps import step_table
from .types import DiagnoseOptions


def gpu_covered(manifest: dict, src, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray | None:
    """Per step, whether it lies inside a window of recorded GPU activity; None when every
    step shares the rank's sources (no kernels at all, CUPTI always on, or all covered)."""
    if not src.kernels:
        return None
    detail = (manifest["sources"].get("cupti") or {}).get("detail") or {}  # sources: required; cupti, detail: optional
    if detail.get("windows") is None:
        return None
    cov = covered_steps(manifest, start_ns, end_ns)
    return None if cov.all() else cov


def diagnose(incident: Incident, *, incident_id: str, snapshot_digest: str, options: DiagnoseOptions | None = None,
             validate: bool = True, collectives: dict | None = None, spool=None) -> dict:
    """Diagnose every step of every rank; returns a diagnosis record (validated unless the
    caller writes it with stored.write_diagnosis, which validates anyway). With a
    spool.StepSpool, each rank's steps go to its tables as the rank is done and the record has
    no `steps` (write it with spool.write_spooled). Each rank's steps are diagnosed all at
    once (columns.py), with their evidence kept for every step up to
    columns.EVIDENCE_ALL_UP_TO steps, else for the steps a reader opens first."""
    opts = options or DiagnoseOptions()
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
    coll = collective_findings(incident, collectives) or job_mod.collective_span_findings(incident, origin)
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
        m = step_measures(ev, starts, ends, src)
        # A job's ranks are read against each other by what their steps spend in each span (job.py).
        profile = job_mod.span_profile(ev, tids, starts, ends) if job_ranks else None
        cold = warmup.cold_steps(ends - starts, opts)
        windows.append(window_record(ev, int(starts.min()), int(ends.max()), src, origin, opts))

        frame = StepFrame(ids, tids, starts, ends)
        # CUPTI armed in windows (capture/gpu_arming.py): a step outside them is read as a step
        # without GPU evidence ("kernels not observed"), never as a step with an idle GPU.
        covered = gpu_covered(incident.manifest, src, starts + origin, ends + origin)
        cols = columns.diagnose_rank(ev, frame, src, opts, m, cold, origin, coll,
                                     keep_all=steps.num_rows <= columns.EVIDENCE_ALL_UP_TO, covered=covered)
        rows = excess_mod.slow_steps([cols.detail[k] for k in sorted(cols.detail)], opts.slow_step_factor)
        pos = {int(ids[k]): k for k in cols.detail}
        slow.extend(with_findings(growth(rows, pos, cols.excess, ev, starts, ends), cols.detail, pos))
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
        if profile is not None and acc.job[-1] is not None:
            acc.job[-1]["span_profile"] = profile
        ev = m = None  # before the next rank's evidence is built
    record = diagnosis_record(incident, incident_id, snapshot_digest, opts, step_records, windows, slow, coll, spool, acc)
    if validate and spool is None:
        records.validate(record, "diagnosis")
    elif validate:
        spool.validate(record)  # its steps were checked row by row as they went to the tables
    return record
