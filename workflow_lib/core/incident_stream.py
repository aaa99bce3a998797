"""An incident directory written and read one rank at a time, so memory follows one rank's
rows, not the whole job's (issue 26: 16 rank copies of a 1M-event trace held every rank's
columns at once, in the import and again in the diagnosis).

    with IncidentWriter(path, names) as w:      # the import: each rank's tables as it finishes
        w.add("kernels", table); ...
        w.finish(manifest)                      # tables renamed into place, then the manifest
    inc = read_incident_by_rank(path)           # the diagnosis: inc.for_rank(rk) reads one rank

On disk this is the same incident as incident.write_incident writes (same tables, rows, schema,
manifest); only the Parquet row groups differ: each `add` is its own row groups, so a rank's
rows are found from the footer's rank statistics without reading the others.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import tables
from .atomic import atomic_path
from .cas import hash_file
from .errors import InputError, StallcaseError
from .incident import Incident, open_incident, write_manifest
from .vocabulary import rank_key


class IncidentWriter:
    """Tables appended rank by rank to Parquet files beside their final names; nothing is
    renamed into place until `finish`, and leaving the block by an exception removes them all
    (no manifest, no tables: nothing half-written)."""

    def __init__(self, path: str | os.PathLike, names: tuple[str, ...]):
        self.path = Path(path)
        self.names = names
        for name in names:
            if name not in tables.TABLES:
                raise StallcaseError(self.path, f"unknown table '{name}'")
        self.rows = {n: 0 for n in names}
        self._span: dict[str, tuple[int, int]] = {}
        self._stack = contextlib.ExitStack()
        self._tmp: dict[str, Path] = {}
        self._writers: dict[str, pq.ParquetWriter] = {}

    def __enter__(self) -> "IncidentWriter":
        # The directories this writer creates go again with its files when the import fails.
        # Every folder up to the first that exists (the incidents directory too, when the import
        # made it), innermost first.
        self._made = [d for d in (self.path / "tables", *(self.path / "tables").parents) if not d.exists()]
        (self.path / "tables").mkdir(parents=True, exist_ok=True)
        self._stack.__enter__()
        for name in self.names:
            self._tmp[name] = self._stack.enter_context(atomic_path(self.path / f"tables/{name}.parquet"))
        return self

    def __exit__(self, *exc) -> bool:
        try:
            self._close()
        finally:
            suppressed = self._stack.__exit__(*exc)  # on an exception: every temp file removed
        if exc[0] is not None:
            for d in self._made:
                with contextlib.suppress(OSError):
                    d.rmdir()  # only if empty
        return suppressed

    def _close(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()

    def add(self, name: str, table: pa.Table) -> None:
        """Check one rank's rows as the reader will (schema, intervals) and append them."""
        table = tables.check_table(name, table, self.path / f"tables/{name}.parquet")
        if table.num_rows == 0:
            return
        w = self._writers.get(name)
        if w is None:
            w = self._writers[name] = pq.ParquetWriter(self._tmp[name], tables.TABLES[name], compression="zstd")
        w.write_table(table)
        self.rows[name] += table.num_rows
        if "start_ns" in table.column_names and "end_ns" in table.column_names:
            lo, hi = int(np.min(table["start_ns"].to_numpy())), int(np.max(table["end_ns"].to_numpy()))
            old = self._span.get(name)
            self._span[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))

    def window(self) -> dict | None:
        """Earliest start and latest end over every table written so far (None: no rows)."""
        if not self._span:
            return None
        return {"start_ns": min(s for s, _ in self._span.values()), "end_ns": max(e for _, e in self._span.values())}

    def finish(self, manifest: dict) -> Path:
        """Close the tables, rename them into place, then write the manifest (lacking `tables`)."""
        entries = {}
        for name in self.names:
            if name not in self._writers:  # no rows at all: an empty table, as write_incident writes it
                pq.write_table(tables.empty(name), self._tmp[name], compression="zstd")
        self._close()
        for name in self.names:
            entries[name] = {"path": f"tables/{name}.parquet", "rows": self.rows[name], "digest": hash_file(self._tmp[name])}
        self._stack.close()  # renames every table onto its final name
        return write_manifest(self.path, manifest, entries)


class RankedIncident(Incident):
    """A verified incident whose tables are read when asked for: `table(name)` reads a whole
    table (the small ones: steps, collectives), `for_rank(rk)` an Incident holding one rank's
    rows of every table, read only from the row groups whose rank statistics can hold them."""

    def __init__(self, path: Path, manifest: dict, paths: dict[str, Path]):
        super().__init__(path=path, manifest=manifest, tables={})
        self.paths = paths
        self._whole: dict[str, pa.Table] = {}

    def table(self, name: str) -> pa.Table:
        if name not in self.paths:
            return tables.empty(name)
        if name not in self._whole:
            t = tables.read_table(self.paths[name], name)
            _check_rows(t.num_rows, self.manifest["tables"][name]["rows"], self.paths[name])
            if name in ("steps", "collectives"):  # one row per step or op: kept, read often
                self._whole[name] = t
            return t
        return self._whole[name]

    def ranks(self, name: str) -> np.ndarray:
        """The rank keys (vocabulary.rank_key: -1 = no rank) present in a table, one row group at a time."""
        if name not in self.paths:
            return np.zeros(0, np.int64)
        with open(self.paths[name], "rb") as fh:
            pf = pq.ParquetFile(fh)
            if pf.schema_arrow.get_field_index("rank") < 0:
                return np.full(min(pf.metadata.num_rows, 1), -1, np.int64)
            seen = [np.unique(rank_key(pf.read_row_group(i, columns=["rank"])["rank"])) for i in range(pf.num_row_groups)]
        return np.unique(np.concatenate(seen)) if seen else np.zeros(0, np.int64)

    def for_rank(self, rk: int) -> Incident:
        out = {}
        for name, tpath in self.paths.items():
            out[name] = self._whole[name] if name in self._whole else _read_rank(tpath, name, rk)
        return Incident(path=self.path, manifest=self.manifest, tables=out)


def _check_rows(got: int, want: int, where) -> None:
    if got != want:
        raise InputError(where, f"manifest says {want} rows, file has {got}")


def _read_rank(path: Path, name: str, rk: int) -> pa.Table:
    """Rows of rank key `rk` (-1: null rank), checked as read_table checks a whole table."""
    try:
        with open(path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            col = pf.schema_arrow.get_field_index("rank")
            if col < 0:  # a file without the column: every row has no rank
                t = pf.read() if rk < 0 else pf.schema_arrow.empty_table()
                return tables.check_table(name, t, path)
            parts = []
            for i in range(pf.num_row_groups):
                st = pf.metadata.row_group(i).column(col).statistics if col >= 0 else None
                if st is not None and st.has_min_max and rk >= 0 and not (st.min <= rk <= st.max):
                    continue
                if st is not None and rk < 0 and st.null_count == 0 and st.has_min_max:
                    continue
                t = pf.read_row_group(i)
                mine = rank_key(t["rank"]) == rk
                parts.append(t if mine.all() else t.filter(pa.array(mine)))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable Parquet file ({str(exc).splitlines()[0][:200]})") from None
    t = pa.concat_tables(parts) if parts else pf.schema_arrow.empty_table()
    return tables.check_table(name, t, path)


def read_incident_by_rank(path: str | os.PathLike, *, verify: bool = True) -> RankedIncident:
    """incident.read_incident's checks (manifest, digests, footers, size cap), rows left on disk."""
    path = Path(path)
    manifest, paths = open_incident(path, verify=verify)
    for name, tpath in paths.items():  # the rows are counted from the footers, before any is read
        with open(tpath, "rb") as fh:
            _check_rows(pq.ParquetFile(fh).metadata.num_rows, manifest["tables"][name]["rows"], tpath)
    return RankedIncident(path, manifest, paths)
