"""A diagnosis' per-step results as two columnar tables (issue 26): one row per (rank, step),
one row per (step, check).

A step held as JSON is 2.5-3.6 KB and ~13 KB of Python objects; a million steps did not fit
(docs/per_step_table.md). As columns a step is ~100 bytes of steps table and ~14 rows of
~30 bytes of findings, and the readers that add up over steps (the report's by-check sums,
its finding tracks, the trials' components) read columns instead of walking dicts.

    tables_from_steps(steps) -> (steps_tbl, findings_tbl)      # the record's step objects as rows
    steps_from_tables(steps_tbl, findings_tbl, rows=None)      # the step objects back
    check_steps(tbl, where) / check_findings(tbl, n_steps, where)  # every row, on write and read

The two Arrow schemas below are a contract with the vectorized diagnosis, which builds these
tables directly (without per-step dicts): names, types and order are fixed. What is free-form
per check (a finding's evidence) or a short list (the longest gaps, what evidence is missing)
is a canonical JSON string column, so each check keeps its own evidence shape. Evidence may be
null: at large sizes the vectorized path keeps it only for the slow and warm-up steps, and a
step read back from such a row carries `evidence: None` (readers say "evidence kept for slow
steps only").

Round trip: steps_from_tables(*tables_from_steps(s)) == s for the step objects diagnose()
writes (every key present, `excess` and `share_of_excess` included). A version-1 step without
`excess` comes back with `excess: None` and `share_of_excess: None` (readers treat absent and
null alike: "not available").

Version history (bump STEP_TABLES_VERSION when a column is added or changes meaning or type;
the record's version says which a file is):
  1 - first version (diagnosis record version 3).
  2 - findings.at_json: where the finding sits in its step (diagnose/places.py), canonical
      JSON of the record's findings[].at (a list of {start_ns, end_ns}), null where it has no
      place of its own (diagnosis record version 4). Text, as gaps_longest_json: a nested
      list<struct> column cost 40% more Parquet write time for these 17-rows-a-step, nearly all
      null rows (0.161 vs 0.112 s per 131,072 steps; text 0.143 s). A version-1 findings table
      reads with at_json null (with_at_column, called by stored.load_diagnosis).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import InputError
from .checks import NAMES
from .fast import searchsorted
from .types import FINDING_VERDICTS

STEP_TABLES_VERSION = 2

_i64, _f64, _str = pa.int64(), pa.float64(), pa.string()
_code = pa.dictionary(pa.int8(), pa.string())
# The `missing` lists: a few distinct texts repeated over every step; int32 codes, since a
# check's missing text may name a file or a rank and so need not stay under 128 values.
_missing_code = pa.dictionary(pa.int32(), pa.string())


def _schema(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=null) for n, t, null in fields])


STEPS_SCHEMA = _schema(
    ("step_id", _i64, False), ("rank", _i64, True), ("thread_id", _i64, False),
    ("start_ns", _i64, False), ("end_ns", _i64, False), ("wall_ns", _i64, False),
    ("kernel_sum_ns", _i64, True), ("busy_ns", _i64, True), ("idle_ns", _i64, True),
    ("host_api_ns", _i64, True), ("host_sync_api_ns", _i64, True), ("overlap_factor", _f64, True),
    ("gaps_count", _i64, False), ("gaps_total_ns", _i64, False), ("gaps_longest_json", _str, False),
    ("explained_ns", _i64, False), ("unexplained_ns", _i64, False), ("excess_json", _str, True),
)
"""One row per (rank, step), rank-major then time order (the record's step order)."""

FINDINGS_SCHEMA = _schema(
    ("step_row", _i64, False), ("check", _code, False), ("verdict", _code, False),
    ("explains_ns", _i64, False), ("share_of_excess", _f64, True), ("missing_json", _missing_code, False),
    ("evidence_json", _str, True), ("at_json", _str, True),
)
"""One row per (step row, check), in each step's findings order; step_row indexes the steps table."""

SCHEMAS = {"steps": STEPS_SCHEMA, "findings": FINDINGS_SCHEMA}
# Step measures held as plain columns: the step object's key is the column's name.
_MEASURES = ("kernel_sum_ns", "busy_ns", "idle_ns", "host_api_ns", "host_sync_api_ns")
_PLAIN = ("step_id", "rank", "thread_id", "start_ns", "end_ns", "wall_ns", *_MEASURES, "overlap_factor",
          "explained_ns", "unexplained_ns")
NOT_KEPT = "evidence kept for slow steps only"
"""What a reader shows for a finding whose evidence the table did not keep (evidence_json null)."""


def canonical(value) -> str:
    """Canonical JSON text (sorted keys, compact), as records' digests are over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_STEP_KEYS = frozenset((*_PLAIN, "gaps", "findings"))
_FINDING_KEYS = frozenset(("check", "verdict", "explains_ns", "evidence", "missing"))
# Fields a finding of an older version may lack (read as null): share_of_excess before version
# 2, `at` before version 4.
_FINDING_LATER = frozenset(("share_of_excess", "at"))


def _check_keys(steps: list[dict], where) -> None:
    """Each step object holds the fields a column holds, and no other (a field no column holds
    would be lost on the way to the tables); `excess` and `share_of_excess` may be absent."""
    for i, st in enumerate(steps):
        keys = st.keys() - {"excess"}
        if keys != _STEP_KEYS:
            odd = sorted(keys ^ _STEP_KEYS)
            raise InputError(where, f"step {i} (step_id {st.get('step_id')}): field(s) {', '.join(odd)} "
                                    f"{'not in the steps table' if odd[0] in keys else 'missing'}")
        for f in st["findings"]:
            fk = f.keys() - _FINDING_LATER
            if fk != _FINDING_KEYS:
                odd = sorted(fk ^ _FINDING_KEYS)
                raise InputError(where, f"step {i} (step_id {st.get('step_id')}): a finding's field(s) {', '.join(odd)} "
                                        f"{'not in the findings table' if odd[0] in fk else 'missing'}")


def tables_from_steps(steps: list[dict], *, where: str | os.PathLike = "<diagnosis steps>") -> tuple[pa.Table, pa.Table]:
    """The record's step objects (in record order) as the steps and findings tables, checked row by row."""
    _check_keys(steps, where)
    cols = {k: pa.array([st[k] for st in steps], _f64 if k == "overlap_factor" else _i64) for k in _PLAIN}
    cols["gaps_count"] = pa.array([st["gaps"]["count"] for st in steps], _i64)
    cols["gaps_total_ns"] = pa.array([st["gaps"]["total_ns"] for st in steps], _i64)
    cols["gaps_longest_json"] = pa.array([canonical(st["gaps"]["longest"]) for st in steps], _str)
    cols["excess_json"] = pa.array([None if st.get("excess") is None else canonical(st["excess"]) for st in steps], _str)
    steps_tbl = pa.Table.from_arrays([cols[f.name] for f in STEPS_SCHEMA], schema=STEPS_SCHEMA)
    row, check, verdict, explains, share, missing, evidence, at = [], [], [], [], [], [], [], []
    for i, st in enumerate(steps):
        for f in st["findings"]:
            row.append(i)
            check.append(f["check"])
            verdict.append(f["verdict"])
            explains.append(f["explains_ns"])
            share.append(f.get("share_of_excess"))
            missing.append(canonical(f["missing"]))
            evidence.append(None if f["evidence"] is None else canonical(f["evidence"]))
            at.append(None if f.get("at") is None else canonical(f["at"]))
    findings_tbl = pa.Table.from_arrays(
        [pa.array(row, _i64), pa.array(check, _str).dictionary_encode().cast(_code),
         pa.array(verdict, _str).dictionary_encode().cast(_code), pa.array(explains, _i64), pa.array(share, _f64),
         pa.array(missing, _str).dictionary_encode(), pa.array(evidence, _str), pa.array(at, _str)], schema=FINDINGS_SCHEMA)
    return check_steps(steps_tbl, where), check_findings(findings_tbl, len(steps), where,
                                                          explained_ns=steps_tbl["explained_ns"].to_numpy())


def _loads(text: str, column: str, row: int, where):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise InputError(where, f"column '{column}' row {row} is not valid JSON") from None


def _text(tbl: pa.Table, name: str) -> list:
    col = tbl[name]
    if pa.types.is_dictionary(col.type):
        col = col.cast(_str)
    return col.to_pylist()


def steps_from_tables(steps_tbl: pa.Table, findings_tbl: pa.Table, rows=None, *,
                      where: str | os.PathLike = "<diagnosis tables>") -> list[dict]:
    """The step objects of `rows` (steps-table row indices; None: all), in the order given.
    Equal to the record's step objects where the evidence was kept."""
    n = steps_tbl.num_rows
    idx = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"step rows {idx.min()}..{idx.max()} outside the {n} rows of the steps table")
    part = steps_tbl.take(pa.array(idx, _i64))
    plain = {k: part[k].to_pylist() for k in _PLAIN}
    g_count, g_total = part["gaps_count"].to_pylist(), part["gaps_total_ns"].to_pylist()
    longest, excess = part["gaps_longest_json"].to_pylist(), part["excess_json"].to_pylist()
    # The findings of the asked rows: their positions in the findings table, by a binary
    # search on step_row (written in step order), not a scan of every row.
    step_row = findings_tbl["step_row"].to_numpy()
    lo = searchsorted(step_row, idx, side="left")
    hi = searchsorted(step_row, idx, side="right")
    take = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)]) if idx.size else np.zeros(0, np.int64)
    f = findings_tbl.take(pa.array(take.astype(np.int64), _i64))
    f_check, f_verdict, f_missing = _text(f, "check"), _text(f, "verdict"), _text(f, "missing_json")
    f_explains, f_share, f_evidence = f["explains_ns"].to_pylist(), f["share_of_excess"].to_pylist(), f["evidence_json"].to_pylist()
    f_at = f["at_json"].to_pylist()
    out, k = [], 0
    for j in range(idx.size):
        row = int(idx[j])
        findings = []
        for _ in range(int(hi[j] - lo[j])):
            ev = f_evidence[k]
            findings.append({"check": f_check[k], "verdict": f_verdict[k], "explains_ns": f_explains[k],
                             "evidence": None if ev is None else _loads(ev, "evidence_json", int(take[k]), where),
                             "missing": _loads(f_missing[k], "missing_json", int(take[k]), where),
                             "share_of_excess": f_share[k],
                             "at": None if f_at[k] is None else _loads(f_at[k], "at_json", int(take[k]), where)})
            k += 1
        st = {key: plain[key][j] for key in _PLAIN}
        st["gaps"] = {"count": g_count[j], "total_ns": g_total[j],
                      "longest": _loads(longest[j], "gaps_longest_json", row, where)}
        st["findings"] = findings
        st["excess"] = None if excess[j] is None else _loads(excess[j], "excess_json", row, where)
        out.append(st)
    return out


def with_at_column(findings: pa.Table) -> pa.Table:
    """A version-1 findings table (diagnosis record version 3) as version 2: at_json null on
    every row (that version did not record where findings sit)."""
    if "at_json" in findings.column_names:
        return findings
    return findings.append_column(FINDINGS_SCHEMA.field("at_json"), pa.nulls(findings.num_rows, _str))


def _conform(name: str, table: pa.Table, where) -> pa.Table:
    from ..core import tables

    return tables.conform(f"diagnosis {name}", table, where, schema=SCHEMAS[name])


def dict_codes(col: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """(each row's code, the values the codes index) of a dictionary column: compared and
    grouped by code, a 14M-row column never becomes 14M Python strings."""
    col = col.unify_dictionaries() if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    if col.num_chunks == 0:
        return np.zeros(0, np.int64), []
    idx = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in col.chunks])  # int8/int32: no widening copy
    return idx, col.chunk(0).dictionary.to_pylist()


def codes_in_use(codes: tuple[np.ndarray, list]) -> np.ndarray:
    """The codes some row holds (a dictionary may carry values no row uses)."""
    idx, values = codes
    return np.flatnonzero(np.bincount(idx.astype(np.intp, copy=False), minlength=len(values))) if idx.size else idx


def is_value(codes: tuple[np.ndarray, list], value) -> np.ndarray:
    """Rows of a dict_codes column equal to `value`."""
    idx, values = codes
    want = [i for i, v in enumerate(values) if v == value]
    return np.isin(idx, want) if want else np.zeros(idx.size, bool)


def _bad(where, name: str, mask, what: str) -> None:
    """Refuse the table when any row of `mask` (an Arrow or numpy boolean column) is true."""
    n = int(pc.sum(mask).as_py() or 0) if isinstance(mask, (pa.Array, pa.ChunkedArray)) else int(np.count_nonzero(mask))
    if n:
        raise InputError(where, f"diagnosis {name} table: {n} row(s) {what}")


def _framed(col, first: str, last: str):
    """True where a JSON text column does not start with `first` and end with `last` (a cheap
    check of every row; a row is parsed in full when a step is read back)."""
    return pc.invert(pc.and_(pc.starts_with(col, first), pc.ends_with(col, last)))


def check_steps(table: pa.Table, where: str | os.PathLike = "<diagnosis steps>") -> pa.Table:
    """The steps table conformed to STEPS_SCHEMA, every row checked; InputError (one line) otherwise."""
    t = _conform("steps", table, where)
    if t.num_rows == 0:
        return t
    _bad(where, "steps", pc.not_equal(t["wall_ns"], pc.subtract(t["end_ns"], t["start_ns"])), "with wall_ns != end_ns - start_ns")
    for col in ("wall_ns", *_MEASURES, "gaps_count", "gaps_total_ns", "explained_ns", "unexplained_ns"):
        _bad(where, "steps", pc.fill_null(pc.less(t[col], 0), False), f"with negative {col}")
    _bad(where, "steps", pc.fill_null(pc.less(t["rank"], 0), False), "with a negative rank")
    _bad(where, "steps", pc.fill_null(pc.less(t["overlap_factor"], 0), False), "with a negative or NaN overlap_factor")
    _bad(where, "steps", pc.fill_null(pc.is_nan(t["overlap_factor"]), False), "with a negative or NaN overlap_factor")
    _bad(where, "steps", pc.not_equal(pc.add(t["explained_ns"], t["unexplained_ns"]), t["wall_ns"]),
         "with explained_ns + unexplained_ns != wall_ns")
    _bad(where, "steps", _framed(t["gaps_longest_json"], "[", "]"), "whose gaps_longest_json is not a JSON list")
    _bad(where, "steps", pc.fill_null(_framed(t["excess_json"], "{", "}"), False), "whose excess_json is not a JSON object")
    return t


def check_findings(table: pa.Table, n_steps: int, where: str | os.PathLike = "<diagnosis findings>",
                   explained_ns: np.ndarray | None = None) -> pa.Table:
    """The findings table conformed to FINDINGS_SCHEMA, every row checked against the steps
    table's row count (and, when given, each step's explained_ns: the sum of its findings'
    explains_ns); InputError (one line) otherwise."""
    t = _conform("findings", table, where)
    if t.num_rows == 0:
        return t
    row = t["step_row"].to_numpy()
    _bad(where, "findings", (row < 0) | (row >= n_steps), f"with step_row outside the {n_steps} rows of the steps table")
    _bad(where, "findings", row[1:] < row[:-1], "out of step order (step_row decreases)")
    codes = {col: dict_codes(t[col]) for col in ("check", "verdict", "missing_json")}
    for col, allowed in (("check", NAMES), ("verdict", FINDING_VERDICTS)):
        idx, values = codes[col]
        unknown = sorted({values[i] for i in codes_in_use(codes[col])} - set(allowed))
        if unknown:
            raise InputError(where, f"diagnosis findings table: unknown {col} {unknown[0]!r} (known: {', '.join(allowed)})")
    attributed = is_value(codes["verdict"], "attributed")
    explains = t["explains_ns"].to_numpy()
    _bad(where, "findings", explains < 0, "with negative explains_ns")
    _bad(where, "findings", ~attributed & (explains != 0), "not attributed with explains_ns != 0")
    share = t["share_of_excess"]
    _bad(where, "findings", pc.fill_null(pc.or_(pc.or_(pc.less(share, 0), pc.greater(share, 1)), pc.is_nan(share)), False),
         "with share_of_excess outside [0, 1]")
    idx, values = codes["missing_json"]
    for i in codes_in_use(codes["missing_json"]):  # the few distinct lists in use, each parsed
        got = _loads(values[i], "missing_json", int(np.argmax(idx == i)), where)
        if not isinstance(got, list) or not all(isinstance(m, str) for m in got):
            raise InputError(where, f"diagnosis findings table: missing_json {values[i][:80]!r} is not a list of strings")
    _bad(where, "findings", is_value(codes["verdict"], "unresolved") & is_value(codes["missing_json"], "[]"),
         "unresolved with nothing missing")
    _bad(where, "findings", pc.fill_null(_framed(t["evidence_json"], "{", "}"), False), "whose evidence_json is not a JSON object")
    _bad(where, "findings", pc.is_valid(t["at_json"]).to_numpy(zero_copy_only=False) & ~attributed,
         "placed (at_json) but not attributed")
    _bad(where, "findings", pc.fill_null(_framed(t["at_json"], '[{"end_ns":', "}]"), False),
         "whose at_json is not a JSON list of intervals")
    if explained_ns is not None:
        sums = np.bincount(row, weights=t["explains_ns"].to_numpy(), minlength=n_steps)
        _bad(where, "findings", sums.astype(np.int64) != explained_ns, "summing to other than their step's explained_ns")
    return t
