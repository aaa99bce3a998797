"""JSON records: the contracts between stages.

Every record a stage writes names its schema (`schemas/<kind>.schema.json`, JSON
Schema 2020-12) and a `schema_version`; it is validated when written and when read.
Records are written canonically (sorted keys, no NaN) and atomically, so the
digest of a record is stable and a reader never sees half a record.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import blake3
import jsonschema
from jsonschema import Draft202012Validator

from . import atomic, bounds, json_pretty, safe_io
from .errors import InputError, RecordError

SCHEMA_DIR = Path(os.environ.get("STALLCASE_SCHEMAS", Path(__file__).resolve().parents[2] / "schemas"))


def canonical_bytes(record: Any) -> bytes:
    """Canonical JSON: sorted keys, compact separators, UTF-8, NaN/Infinity refused."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def digest_of(record: Any) -> str:
    """blake3 hex digest of a record's canonical JSON (a record's identity); a typed record
    (core/typed.py) gives its own digest(): that of the JSON it was read from."""
    if hasattr(record, "KIND") and hasattr(record, "digest"):
        return record.digest()
    return blake3.blake3(canonical_bytes(record)).hexdigest()


@functools.lru_cache(maxsize=None)
def load_schema(kind: str) -> dict:
    path = SCHEMA_DIR / f"{kind}.schema.json"
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(path, "schema file not found") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"schema is not valid JSON: {exc}") from None
    Draft202012Validator.check_schema(schema)
    return schema


@functools.lru_cache(maxsize=None)
def _validator(kind: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(kind), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _first_error(kind: str, record: Any) -> jsonschema.ValidationError | None:
    errors = sorted(_validator(kind).iter_errors(record), key=lambda e: (len(e.path), list(map(str, e.path))))
    return errors[0] if errors else None


# Records that hold one item per step (or per collective operation) can hold millions of items;
# jsonschema walks them node by node at ~5-15 ms per diagnosis step here, which alone would take
# hours on a 1M-step incident (and 7.8 s for a 64-rank job's 2,002 ops, each with its per-rank
# states: 27 MB).
# Above SAMPLE_ABOVE items, such an array is validated on a deterministic sample (the first and
# last SAMPLE_EDGE items and SAMPLE_SPREAD evenly spaced ones) against the full schema, and every
# item, sampled or not, must be an object with a key set some sampled (valid) item has: a missing
# or extra field anywhere is refused, a wrong value type outside the sample is not seen. The
# items are written by one code path per record kind, so a fault in that path shows in the sample.
SAMPLED_ARRAYS = {"diagnosis": "steps", "collectives": "ops"}
SAMPLE_ABOVE = 1000
SAMPLE_EDGE = 100
SAMPLE_SPREAD = 300


def _sampled(kind: str, record: Any) -> tuple[Any, list[int] | None]:
    """(record to validate, sample index map) or (record, None) when validated whole."""
    key = SAMPLED_ARRAYS.get(kind)
    items = record.get(key) if key and isinstance(record, dict) else None
    if not isinstance(items, list) or len(items) <= SAMPLE_ABOVE:
        return record, None
    idx = sample_index(len(items))
    return dict(record, **{key: [items[i] for i in idx]}), idx


def sample_index(n: int) -> list[int]:
    """The items of an n-item array (n > SAMPLE_ABOVE) validated against the full schema."""
    step = max(1, (n - 2 * SAMPLE_EDGE) // SAMPLE_SPREAD)
    return sorted(set(range(SAMPLE_EDGE)) | set(range(n - SAMPLE_EDGE, n)) | set(range(SAMPLE_EDGE, n - SAMPLE_EDGE, step)))


def _shape_error(kind: str, record: dict, idx: list[int]) -> str | None:
    key = SAMPLED_ARRAYS[kind]
    items = record[key]
    shapes = {frozenset(items[i]) for i in idx if isinstance(items[i], dict)}
    for i, it in enumerate(items):
        if not isinstance(it, dict) or frozenset(it) not in shapes:
            return f"{key}/{i}: fields differ from every validated {key} item" if isinstance(it, dict) else f"{key}/{i}: not an object"
    return None


def validate(record: Any, kind: str, *, where: str | os.PathLike | None = None, positions: list[int] | None = None) -> None:
    """Raise RecordError (one line: where, JSON path, problem) if `record` violates schema `kind`.
    Arrays named in SAMPLED_ARRAYS with more than SAMPLE_ABOVE items are checked on a sample
    plus a shape check of every item (see there). `positions`: the record already holds only
    the sample, these are its items' places in the whole array (the caller checks shapes)."""
    if positions is not None:
        checked, idx = record, None
    else:
        checked, idx = _sampled(kind, record)
    idx_map = positions if positions is not None else idx
    err = _first_error(kind, checked)
    if err is not None:
        path = list(err.absolute_path)
        if idx_map is not None and len(path) > 1 and path[0] == SAMPLED_ARRAYS[kind] and isinstance(path[1], int):
            path[1] = idx_map[path[1]]  # name the item's place in the real record
        loc = "/".join(str(p) for p in path) or "(root)"
        msg = err.message if len(err.message) < 300 else err.message[:300] + "..."
        raise RecordError(where or f"<{kind} record>", f"violates {kind} schema at {loc}: {msg}")
    if idx is not None:
        bad = _shape_error(kind, record, idx)
        if bad is not None:
            raise RecordError(where or f"<{kind} record>", f"violates {kind} schema at {bad}")


NOT_FINITE = "record holds NaN or infinity; write null for a missing number"


def _check_finite(obj: Any, where: Any) -> None:
    if isinstance(obj, float) and not math.isfinite(obj):
        raise RecordError(where, NOT_FINITE)
    if isinstance(obj, dict):
        for v in obj.values():
            _check_finite(v, where)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _check_finite(v, where)


def write_record(path: str | os.PathLike, record: dict, kind: str) -> str:
    """Validate, then atomically write `record` to `path`. Returns its digest.

    Nothing is written when validation fails.
    """
    _check_finite(record, path)
    validate(record, kind, where=path)
    return write_validated(path, record)


def write_validated(path: str | os.PathLike, record: dict) -> str:
    """write_record's write, for a record its caller validated (a json_pretty.Encoded array
    inside is checked item by item where it was encoded). Returns its digest."""
    # Hashed and written in pieces (json_pretty): a record of a million steps is never one
    # string or one bytes object in memory. Hashed first, so bad text writes nothing.
    h = blake3.blake3()
    try:
        for piece in json_pretty.canonical_chunks(record):
            h.update(piece.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise RecordError(path, f"record holds text that is not valid Unicode ({exc.reason}: {exc.object[exc.start:exc.end]!r})") from None
    # Pretty on disk for people reading the artifact tree; the digest is over canonical bytes.
    with atomic.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for piece in json_pretty.chunks(record):
                fh.write(piece)
            fh.write("\n")
    return h.hexdigest()


def parse_record(data: bytes, kind: str, where: str | os.PathLike) -> dict:
    """Parse bytes as a JSON record and validate against schema `kind`."""
    try:
        record = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise RecordError(where, "not UTF-8 text") from None
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise RecordError(where, f"not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(record, dict):
        raise RecordError(where, f"expected a JSON object, found {type(record).__name__}")
    if _SURROGATE_ESCAPE.search(data):
        # JSON may spell a lone surrogate (\udcff); it is not Unicode text, and every later
        # UTF-8 encode (records, Parquet, HTML) would fail on it far from this file.
        try:
            canonical_bytes(record)
        except UnicodeEncodeError as exc:
            raise RecordError(where, f"holds a lone surrogate {exc.object[exc.start:exc.end]!r}: not valid Unicode text") from None
    _check_version(record, kind, where)
    try:
        bounds.json_numbers(record, where)  # Python's JSON reads 401-digit integers; int64 columns cannot
    except InputError as exc:
        raise RecordError(where, exc.problem) from None
    validate(record, kind, where=where)
    return record


def newest_version(kind: str) -> int | None:
    """The newest `schema_version` schema `kind` accepts: its `const`, or the largest of its `enum`
    (a schema that still reads older records lists them: `enum: [1, 2]`)."""
    # The cached validator's schema: load_schema() re-reads and meta-validates the file (tens
    # of ms), which every record read paid here.
    spec = _validator(kind).schema.get("properties", {}).get("schema_version", {})
    if isinstance(spec.get("const"), int):
        return spec["const"]
    versions = [v for v in spec.get("enum", []) if isinstance(v, int) and not isinstance(v, bool)]
    return max(versions) if versions else None


def _check_version(record: dict, kind: str, where) -> None:
    """A record from a newer stallcase is refused naming the newest version this one reads."""
    newest = newest_version(kind)
    v = record.get("schema_version")
    if newest is not None and isinstance(v, int) and not isinstance(v, bool) and v > newest:
        raise RecordError(where, f"schema_version {bounds.show(v)} is newer than this stallcase reads "
                                 f"(newest supported: {newest}); upgrade stallcase")
    known = _validator(kind).schema.get("properties", {}).get("schema_version", {}).get("enum")
    if isinstance(known, list) and isinstance(v, int) and not isinstance(v, bool) and v not in known:
        # said before the schema's first error, which would name some field the version lacks
        raise RecordError(where, f"schema_version {bounds.show(v)} is not one this stallcase reads "
                                 f"(it reads {', '.join(map(str, known))})")


def _steps_out_1_to_2(rec: dict) -> dict:
    # Version 1 timed each step from `with rec.step(i)` entry to exit (the body) and knew no work.
    return dict(rec, kind="steps_out", covers="body", items=None, tokens=None)


def _plan_1_to_2(rec: dict) -> dict:
    # Version 1 never observed the workload's Python distributions: null is the schema's "not
    # observed", so preflight has nothing of them to compare (as it had nothing before).
    return {"python_distributions": None, **rec}


def _comparison_1_to_2(rec: dict) -> dict:
    # Version 1 split nothing by component: the verdict, its interval, floor and blocks are the
    # same; the explanation is empty (no component, no prediction) and its sentence says why, so a
    # reader shows what the record holds and never reads a missing estimate as 0.
    return {**rec, "components": [], "predictions": [],
            "change_explained": {"wall_delta_ns_per_step": None, "attributed_share": None, "unexplained_share": None,
                                 "span_share": None, "unresolved": []},
            "sentence": (f"{rec['verdict'].replace('_', ' ')}: this comparison (schema version 1) was made before "
                         "components existed; rerun the compare stage to split the change by cause")}


# A version 1 or 2 execution's runs left out what they did not measure (version 1 knew none
# of these; version 2 wrote capture only for a recorded run, ranks and alternates only after
# they existed); version 3 says null for it, which is what the absence meant.
_EXECUTION_RUN_NULLS = ("metric_source", "work", "ranks", "alternates", "capture")


def _execution_2_to_3(rec: dict) -> dict:
    return dict(rec, runs=[{**dict.fromkeys(_EXECUTION_RUN_NULLS), **run} for run in rec["runs"]])


def _diagnosis_3_to_4(rec: dict) -> dict:
    # Version 3 did not record where a finding sits on its step's timeline (findings[].at):
    # null, "no place recorded", which the report draws as a share of its step. The findings
    # table beside the record gets its at_json column null where it is read (diagnose/stored.py).
    s = rec["summary"]
    slow = [dict(st, findings=[dict(f, at=None) for f in st["findings"]]) if "findings" in st else st
            for st in s.get("slow_steps", [])]
    return dict(rec, summary=dict(s, slow_steps=slow) if "slow_steps" in s else s)


# kind -> {version: function turning a record of that version into one of the next}. A reader
# calls upgrade() once after reading and then sees only the newest shape (pyperf converts old
# formats once, at load). A kind whose newer version only added optional fields needs no step.
UPGRADES: dict[str, dict[int, Any]] = {
    "steps_out": {1: _steps_out_1_to_2},
    "plan": {1: _plan_1_to_2},
    "comparison": {1: _comparison_1_to_2},
    "execution": {2: _execution_2_to_3},
    "diagnosis": {3: _diagnosis_3_to_4},
}
# kind -> {version: what to do instead}: the next version requires what the older record never
# measured (a culprit order, per-component estimates), so no step can supply it truthfully.
NOT_UPGRADABLE: dict[str, dict[int, str]] = {
    "collectives": {1: "re-run the collectives rule"},
    # Not unreadable: version 3 keeps the steps in tables beside the record, which a record
    # alone cannot become; diagnose.load_diagnosis reads versions 1-3 into one shape.
    "diagnosis": {v: "read it with workflow_lib.diagnose.load_diagnosis (its steps become the tables in memory)"
                  for v in (1, 2)},
}


def upgrade(kind: str, record: dict, *, where: str | os.PathLike | None = None) -> dict:
    """`record` (validated, of any version schema `kind` reads) in the newest version's shape.

    Steps run in order (1 -> 2 -> ...); versions with no step only added optional fields, so the
    record is already in the newer shape and only its `schema_version` changes. The result is a
    new dict, validated against the schema; the input is left as it was."""
    newest = newest_version(kind)
    v = record.get("schema_version")
    if newest is None or not isinstance(v, int) or v >= newest:
        return record
    out = dict(record)
    steps = UPGRADES.get(kind, {})
    while v < newest:
        if v in NOT_UPGRADABLE.get(kind, {}):
            raise RecordError(where or f"<{kind} record>", f"schema_version {v} cannot be read as version {newest}: "
                                                  f"{NOT_UPGRADABLE[kind][v]}")
        out = steps[v](out) if v in steps else out
        v += 1
        out["schema_version"] = v
    validate(out, kind, where=where or f"<{kind} record upgraded from version {record['schema_version']}>")
    return out


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a record")


# A record larger than this is refused unread (a 1M-step diagnosis is ~300 MB; manifests are KB).
MAX_RECORD_BYTES = 1 << 30


def read_record(path: str | os.PathLike, kind: str) -> dict:
    """Read and validate a record; any problem is a one-line RecordError naming the file.

    Only a regular file is read (a FIFO or a device is refused before it can block)."""
    try:
        data = safe_io.read_regular(path, max_bytes=MAX_RECORD_BYTES)
    except InputError as exc:
        problem = {"file not found": "record not found",
                   "is a directory, expected a regular file": "is a directory, expected a JSON record"}.get(exc.problem, exc.problem)
        raise RecordError(path, problem) from None
    return parse_record(data, kind, path)
