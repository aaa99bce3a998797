"""Typed records: one frozen dataclass per record kind, its JSON shape and version beside it.

    @typed.record("latest", version=1)
    class Latest:
        incident_id: str = typed.doc("the incident")
        ...
    Latest(...).to_json() -> dict            # what records.write_record writes
    Latest.from_json(records.read_record(path, "latest")) -> Latest
    typed.read(path, Latest) -> Latest       # read, validated, older versions upgraded
    latest.digest()                          # its identity: the digest of the record as written

A field without a default is one the schema requires; an optional field defaults to ABSENT,
which `to_json` leaves out (None is JSON null, a value, not an absence). An optional field whose
absence the schema defines as null (`doc(..., optional=True, absent=None)`) reads as None and is
written as null. `schema_version` and `kind` are class constants (SCHEMA_VERSION, KIND), written
by `to_json`; `from_json` takes the newest version only (older ones go through records.upgrade
first: `read`, `parse` and `of_json` do). tests/test_typed_records.py holds each class and its
schemas/<kind>.schema.json in sync: the same fields, required-ness and JSON types.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .errors import RecordError


class _Absent:
    """An optional field the record leaves out (distinct from None, which is JSON null)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


def doc(text: str, *, optional: bool = False, absent: Any = ABSENT) -> Any:
    """A field with its doc line; `optional`: the schema does not require it, and a record
    without it reads as `absent` (ABSENT: left out again by to_json)."""
    if optional:
        return dataclasses.field(default=absent, metadata={"doc": text, "optional": True})
    return dataclasses.field(metadata={"doc": text})


def record(kind: str, *, version: int):
    """Class decorator: the class as a frozen dataclass with KIND, SCHEMA_VERSION, to_json and from_json."""

    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        taken = sorted({f.name for f in dataclasses.fields(cls)} & _METHODS)
        if taken:  # a field would hide the method every stage calls (or the method the field)
            raise TypeError(f"{cls.__name__}: field(s) {taken} are names of typed-record methods")
        cls.KIND = kind
        cls.SCHEMA_VERSION = version

        def to_json(self) -> dict:
            out = {"schema_version": version, "kind": kind}
            for f in dataclasses.fields(self):
                value = getattr(self, f.name)
                if value is not ABSENT:
                    out[f.name] = value
            return out

        @classmethod
        def from_json(klass, data: dict, where: str = None):
            where = where or f"<{kind} record>"
            if data.get("kind", kind) != kind:
                raise RecordError(where, f"kind {data.get('kind')!r}, expected {kind!r}")
            if data.get("schema_version") != version:
                raise RecordError(where, f"schema_version {data.get('schema_version')!r}, expected {version} "
                                         "(read older records through records.upgrade)")
            names = {f.name for f in dataclasses.fields(klass)}
            extra = sorted(set(data) - names - {"schema_version", "kind"})
            if extra:
                raise RecordError(where, f"fields {extra} are not in {klass.__name__}")
            return klass(**{k: v for k, v in data.items() if k in names})

        def digest(self) -> str:
            """blake3 of the record as written: the file's own record when it was read (an
            upgraded older version keeps the digest other records point at), else of to_json()."""
            from . import records

            source = self.__dict__.get(_READ_FROM)
            return records.digest_of(self.to_json() if source is None else source)

        cls.to_json = to_json
        cls.from_json = from_json
        cls.digest = digest
        return cls

    return wrap


_METHODS = frozenset({"to_json", "from_json", "digest", "KIND", "SCHEMA_VERSION"})

# Where a record read from JSON keeps that JSON for digest() (outside the dataclass fields, so
# equality and to_json ignore it; dataclasses.replace makes a new record without it). The dict
# shares its values with the record, so keeping it costs its keys only.
_READ_FROM = "_typed_read_from"


def of_json(cls, data: dict, where: Any = None):
    """`data`, a record of any version schema `cls.KIND` reads, as `cls`: validated, upgraded
    (records.upgrade, the one place older versions are converted), its digest kept."""
    from . import records

    records.validate(data, cls.KIND, where=where)
    return _typed(cls, data, where)


def parse(data: bytes, cls, where: Any):
    """JSON bytes (a record of any version) as `cls`; a bad record is one RecordError naming `where`."""
    from . import records

    return _typed(cls, records.parse_record(data, cls.KIND, where), where)


def read(path, cls):
    """The record at `path` as `cls` (records.read_record, then as `parse`)."""
    from . import records

    return _typed(cls, records.read_record(path, cls.KIND), path)


def _typed(cls, raw: dict, where: Any):
    from . import records

    where = str(where) if where is not None else None
    obj = cls.from_json(records.upgrade(cls.KIND, raw, where=where), where)
    object.__setattr__(obj, _READ_FROM, raw)
    return obj
