"""A diagnosis' steps to its tables as they are made, rank by rank, and the record written from there.

A step record is ~9 KB of Python objects (3 KB of JSON): 16 ranks x 3,313 steps held ~480 MiB
until the record was written, and a 1M-step incident would hold ~9 GB (issue 26). Here each
rank's steps become rows of the diagnosis' two Parquet tables (stored.TablesWriter) as soon as
the rank is diagnosed, straight from its columns (columns.tables); the summary's sums are made
rank by rank beside it (record.Sums). The record has no `steps`; write_spooled writes
it, last, naming the tables: the same files stored.write_diagnosis writes from the whole list.
"""

from __future__ import annotations

import os

from ..core import records
from .stored import TablesWriter, record_of


class StepSpool:
    def __init__(self, where: str | os.PathLike):
        self.where = where
        self.n = 0
        self.tables = TablesWriter(where)
        self._open = False

    def close(self) -> None:
        """Without write_spooled, nothing is left behind."""
        if self._open:
            self.tables.__exit__(None, None, None)
            self._open = False

    def __enter__(self) -> "StepSpool":
        return self

    def __exit__(self, *exc) -> None:
        if self._open:
            self.tables.__exit__(*exc)
            self._open = False

    def _opened(self) -> None:
        if not self._open:  # opened on the first rank: a dump-only diagnosis never writes here
            self.tables.__enter__()
            self._open = True

    def add(self, steps: list[dict]) -> None:
        """One rank's step records, in record order; they may be dropped once added."""
        self._opened()
        for st in steps:
            records._check_finite(st, self.where)
        self.tables.add(steps)
        self.n += len(steps)

    def add_tables(self, steps_tbl, findings_tbl) -> None:
        """One rank's steps as the two tables (columns.tables; step rows relative to this rank)."""
        self._opened()
        self.tables.add_tables(steps_tbl, findings_tbl)
        self.n += steps_tbl.num_rows

    def validate(self, record: dict) -> None:
        """records.validate of `record` less its steps (they were checked row by row as added)."""
        records._check_finite(record, self.where)
        records.validate(dict(record, steps=[]), "diagnosis", where=self.where)


def write_spooled(path: str | os.PathLike, record: dict, spool: StepSpool) -> dict:
    """Validate and write a diagnosis whose steps are in `spool`'s tables: the tables are
    finished and renamed into place, then the record is written. Returns the record written."""
    if not spool._open:  # no step at all: empty tables
        spool.tables.__enter__()
        spool._open = True
    rec = record_of(record, spool.tables.close())
    records._check_finite(rec, path)
    records.validate(rec, "diagnosis", where=path)
    spool.tables.__exit__(None, None, None)
    spool._open = False
    records.write_validated(path, rec)
    return rec
