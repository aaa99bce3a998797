"""A diagnosis on disk: the JSON record and, beside it, its per-step tables (step_tables.py).

    write_diagnosis(path, diagnosis) -> record written   # tables first, the record last
    load_diagnosis(path) -> Diagnosis                   # any version this stallcase reads
    as_diagnosis(record_or_diagnosis) -> Diagnosis      # the readers' one shape, in memory

`diagnosis.json` is written with `diagnosis.steps.parquet` and `diagnosis.findings.parquet`
(the record's stem + `.steps.parquet` / `.findings.parquet`); the record names each table's
blake3 digest (of the Parquet bytes, as an incident's manifest does) and row count, and is
written only once both tables are on disk, so a reader never pairs a record with tables it
does not name: a left-over table from an earlier run fails the digest check.

Versions (schemas/diagnosis.schema.json): a version-1 or -2 record holds its steps inline;
it reads into the same Diagnosis (its steps become the tables in memory, its slow steps get
their findings from them). A version-3 record is upgraded (core/records.upgrade: its findings
have no `at`, read as null) and its findings table gets at_json null (step_tables.with_at_column).
diagnose() still returns the record with its steps inline (the version-2 shape, what the
checks build step by step); every writer stores it as version 4.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
from dataclasses import dataclass
from pathlib import Path

import blake3
import pyarrow as pa
import pyarrow.parquet as pq

from ..core import atomic, layout, records, safe_io
from ..core.errors import DigestMismatch, InputError, RecordError
from . import step_tables as st_mod
from .types import DIAGNOSIS_VERSION, DiagnosisRecord, DiagnosisSummary, NextExperiment

TABLE_NAMES = layout.DIAGNOSIS_TABLES
INLINE_STEPS_VERSIONS = (1, 2)
"""Record versions that hold `steps` inline (diagnose() builds the version-2 shape)."""
TABLES_VERSIONS = (3, DIAGNOSIS_VERSION)
"""Record versions whose steps are in the tables beside it."""
MAX_TABLE_FILE_BYTES = 2 << 30
"""A step table file larger than this is refused unread (a 1M-step diagnosis' tables are ~40 MB)."""
MAX_FINDINGS_PER_STEP = 32
"""Findings rows per step the footer check allows: one per check (14 today) with room for more."""


def table_paths(record_path: str | os.PathLike) -> dict[str, Path]:
    """Where the tables of the record at `record_path` live: beside it, named by its stem (layout.py)."""
    return {name: Path(p) for name, p in layout.diagnosis_tables(record_path).items()}


@dataclass(frozen=True)
class Diagnosis:
    """A diagnosis as readers see it, whatever version it was written in."""

    record: dict
    """The record less its steps: summary (slow steps with their findings), sources, next experiments."""
    steps_table: pa.Table
    """step_tables.STEPS_SCHEMA: one row per (rank, step)."""
    findings_table: pa.Table
    """step_tables.FINDINGS_SCHEMA: one row per (step row, check)."""

    @property
    def n_steps(self) -> int:
        return self.steps_table.num_rows

    # The parts readers use, typed (frozen classes, read once): `record` is already in the newest
    # shape (load_diagnosis / as_diagnosis upgrade older versions), so a reader reads attributes,
    # with no fallbacks; an optional part an older version never had is typed.ABSENT.
    @functools.cached_property
    def summary(self) -> DiagnosisSummary:
        return summary_of(self.record)

    @functools.cached_property
    def next_experiments(self) -> list[NextExperiment]:
        return next_experiments_of(self.record)

    def step(self, i: int) -> dict:
        """Step row i as the record's step object (evidence None where it was not kept)."""
        return st_mod.steps_from_tables(self.steps_table, self.findings_table, [i])[0]

    def steps(self, rows=None) -> list[dict]:
        """The step objects of `rows` (None: all; a list of 1M dicts is what the tables avoid)."""
        return st_mod.steps_from_tables(self.steps_table, self.findings_table, rows)


def summary_of(record: dict) -> DiagnosisSummary:
    """The summary of a record in the newest shape (one load_diagnosis / as_diagnosis read, or
    one diagnose() just made), as its frozen class."""
    return DiagnosisSummary.from_json(record["summary"], "diagnosis:/summary")


def next_experiments_of(record: dict) -> list[NextExperiment]:
    """The ranked next experiments of a record in the newest shape, as frozen classes."""
    return [NextExperiment.from_json(e, f"diagnosis:/next_experiments/{i}") for i, e in enumerate(record["next_experiments"])]


def _slow_with_findings(body: dict, steps: list[dict]) -> dict:
    """A version-2 body whose slow steps lack their findings: copied from the steps; findings
    made before version 4 (no `at`: where they sat was not recorded) get `at` null, as
    records.upgrade gives a version-3 record's."""
    slow = body["summary"].get("slow_steps")  # summary: required in every version; slow_steps: absent in version 1
    if not slow or all("findings" in s and all("at" in f for f in s["findings"]) for s in slow):
        return body
    at = {(s["rank"], s["step_id"]): s for s in steps}
    listed = [dict(s, findings=at[(s["rank"], s["step_id"])]["findings"]) if (s["rank"], s["step_id"]) in at else s
              for s in slow]
    listed = [dict(s, findings=[{"at": None, **f} for f in s["findings"]]) if "findings" in s else s for s in listed]
    return dict(body, summary=dict(body["summary"], slow_steps=listed))


def as_diagnosis(diagnosis, where: str | os.PathLike = "<diagnosis record>") -> Diagnosis:
    """A Diagnosis from a record with its steps inline (diagnose()'s result, a version-1 or -2
    file's record) or a Diagnosis itself."""
    if isinstance(diagnosis, Diagnosis):
        return diagnosis
    if "steps" not in diagnosis:
        raise RecordError(where, f"diagnosis record of version {diagnosis['schema_version']} holds no steps: "
                                 "read it with load_diagnosis(path), which reads its tables")
    steps = diagnosis["steps"]
    body = _slow_with_findings({k: v for k, v in diagnosis.items() if k != "steps"}, steps)
    return Diagnosis(body, *st_mod.tables_from_steps(steps, where=where))


class TablesWriter:
    """The two tables written beside a record, rank by rank (memory: one rank's rows), each to
    a temp file renamed into place when the writer closes cleanly; on an exception nothing is
    left. `entries()` after close: the record's `step_tables`."""

    def __init__(self, record_path: str | os.PathLike):
        self.record_path = Path(record_path)
        self._stack = contextlib.ExitStack()
        self._tmp: dict[str, Path] = {}
        self._writers: dict[str, pq.ParquetWriter] = {}
        self.rows = {name: 0 for name in TABLE_NAMES}
        self._digests: dict[str, str] = {}

    def __enter__(self) -> "TablesWriter":
        # The record is written last, after the tables are in place: an output path it could
        # not replace (a FIFO, a symlink) is refused before anything is written beside it.
        safe_io.check_output_file(self.record_path)
        try:
            for name, dest in table_paths(self.record_path).items():
                self._tmp[name] = self._stack.enter_context(atomic.atomic_path(dest))
        except BaseException:
            self._stack.__exit__(None, None, None)
            raise
        return self

    def add(self, steps: list[dict]) -> None:
        """Step objects (record order), converted and checked row by row."""
        self.add_tables(*st_mod.tables_from_steps(steps, where=self.record_path))

    def add_tables(self, steps_tbl: pa.Table, findings_tbl: pa.Table) -> None:
        """Steps and findings tables of the next steps (findings' step_row relative to this steps table)."""
        steps_tbl = st_mod.check_steps(steps_tbl, self.record_path)
        findings_tbl = st_mod.check_findings(findings_tbl, steps_tbl.num_rows, self.record_path,
                                             explained_ns=steps_tbl["explained_ns"].to_numpy())
        if self.rows["steps"]:
            shifted = pa.array(findings_tbl["step_row"].to_numpy() + self.rows["steps"], pa.int64())
            findings_tbl = findings_tbl.set_column(0, st_mod.FINDINGS_SCHEMA.field("step_row"), shifted)
        for name, tbl in (("steps", steps_tbl), ("findings", findings_tbl)):
            if name not in self._writers:
                self._writers[name] = pq.ParquetWriter(str(self._tmp[name]), st_mod.SCHEMAS[name], compression="zstd",
                                                       metadata_collector=None)
            self._writers[name].write_table(tbl)
            self.rows[name] += tbl.num_rows

    def close(self) -> dict:
        """Finish both files (hashed before they are renamed into place); returns `step_tables`."""
        for name in TABLE_NAMES:
            if name not in self._writers:  # no step at all (a dump-only diagnosis): empty tables
                self._writers[name] = pq.ParquetWriter(str(self._tmp[name]), st_mod.SCHEMAS[name], compression="zstd")
            self._writers[name].close()
            self._digests[name] = blake3.blake3(self._tmp[name].read_bytes()).hexdigest()
        return self.entries()

    def entries(self) -> dict:
        return {name: {"digest": self._digests[name], "rows": self.rows[name]} for name in TABLE_NAMES}

    def __exit__(self, *exc) -> None:
        """Renames both files into place after a clean close(); otherwise leaves nothing."""
        if exc[0] is None and len(self._digests) == len(TABLE_NAMES):
            self._stack.__exit__(None, None, None)
            return
        for w in self._writers.values():
            with contextlib.suppress(Exception):
                w.close()
        try:  # atomic_path removes its temp file when an exception passes through it
            self._stack.__exit__(_Discarded, _Discarded(), None)
        except _Discarded:
            pass


class _Discarded(Exception):
    """Passed through the temp files' atomic_path contexts to remove them (no close())."""


def _rank_runs(steps: list[dict]):
    """Consecutive steps of one rank: written as one row group each, as diagnose_to_file writes
    them rank by rank, so both paths write the same bytes."""
    start = 0
    for i in range(1, len(steps) + 1):
        if i == len(steps) or steps[i]["rank"] != steps[start]["rank"]:
            yield steps[start:i]
            start = i


def record_of(body: dict, entries: dict) -> dict:
    """The version-3 record: the body (no steps) naming its tables, through its class and its
    nested classes (the summary: types.DiagnosisSummary); a field a class does not hold is
    refused here, before anything is renamed into place."""
    fields = {k: v for k, v in body.items() if k not in ("steps", "schema_version", "kind")}
    return DiagnosisRecord.from_json(dict(fields, step_tables=entries, schema_version=DIAGNOSIS_VERSION),
                                     "<diagnosis record>").to_json()


def write_diagnosis(path: str | os.PathLike, diagnosis) -> dict:
    """Write a diagnosis (diagnose()'s record with its steps inline, or a Diagnosis) as the
    version-3 record and its two tables; the record is validated before anything is renamed
    into place and written last. Returns the record written."""
    with TablesWriter(path) as w:
        if isinstance(diagnosis, Diagnosis):
            body = diagnosis.record
            w.add_tables(diagnosis.steps_table, diagnosis.findings_table)
        else:
            body = diagnosis
            for run in _rank_runs(diagnosis["steps"]):
                w.add(run)
        rec = record_of(body, w.close())
        records._check_finite(rec, path)
        records.validate(rec, "diagnosis", where=path)  # before the tables are renamed: nothing half-written
    records.write_validated(path, rec)
    return rec


def _read_table(path: Path, name: str, entry: dict, record_path) -> pa.Table:
    data = safe_io.read_regular(path, max_bytes=MAX_TABLE_FILE_BYTES)
    actual = blake3.blake3(data).hexdigest()
    if actual != entry["digest"]:
        raise DigestMismatch(path, f"digest mismatch: {Path(record_path).name} says {entry['digest']}, file hashes to {actual}")
    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        meta = pf.metadata
        if meta.num_rows != entry["rows"]:
            raise InputError(path, f"table has {meta.num_rows} rows, {Path(record_path).name} says {entry['rows']}")
        table = pf.read()
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable Parquet file ({str(exc).splitlines()[0][:200]})") from None
    return table


def load_diagnosis(path: str | os.PathLike) -> Diagnosis:
    """Read a diagnosis record of any version this stallcase reads, with its tables (digests
    checked, every row checked against the table's schema); one-line error otherwise."""
    rec = records.read_record(path, "diagnosis")
    v = rec["schema_version"]
    if v in INLINE_STEPS_VERSIONS:
        return as_diagnosis(rec, path)
    if v not in TABLES_VERSIONS:  # the schema's enum lists what reads; a gap there would land here
        raise RecordError(path, f"diagnosis schema_version {v!r} is not one this stallcase reads")
    rec = records.upgrade("diagnosis", rec, where=path)
    paths = table_paths(path)
    for name in TABLE_NAMES:
        if not paths[name].is_file():
            raise InputError(paths[name], f"table of {Path(path).name} not found (written beside it by the diagnose stage)")
    steps = st_mod.check_steps(_read_table(paths["steps"], "steps", rec["step_tables"]["steps"], path), paths["steps"])
    findings = _read_table(paths["findings"], "findings", rec["step_tables"]["findings"], path)
    if v < DIAGNOSIS_VERSION:  # a findings table made before at_json (step_tables' version 1)
        findings = st_mod.with_at_column(findings)
    findings = st_mod.check_findings(findings, steps.num_rows, paths["findings"], explained_ns=steps["explained_ns"].to_numpy())
    return Diagnosis({k: v for k, v in rec.items()}, steps, findings)
