"""Typed records: one frozen dataclass per record kind, its JSON shape and version beside it.

    @typed.record("latest", version=1)
    class Latest:
        incident_id: str = typed.doc("the incident")
        ...
    Latest(...).to_json() -> dict            # what records.write_record writes
    Latest.from_json(records.read_record(path, "latest")) -> Latest
    typed.read(path, Latest) -> Latest       # read, validated, older versions upgraded
    latest.digest()                          # its identity: the digest of the record as written

A nested object of a record (an interval, a block, a component) is its own frozen class,
`@typed.nested`, read and written with its record: a field annotated with a nested class, a
`list[...]` of one or a `dict[str, ...]` of one is converted both ways by `to_json`/`from_json`
(a plain `dict` or `list` field stays JSON: a map keyed by data, such as block id -> digest).

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
import types as pytypes
import typing
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


def nested(cls):
    """Class decorator: a nested object of a record as a frozen dataclass with to_json and from_json."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    # a nested object has no digest of its own (a plan arm's source file has a `digest` field)
    taken = sorted({f.name for f in dataclasses.fields(cls)} & (_METHODS - {"digest", "KIND", "SCHEMA_VERSION"}))
    if taken:
        raise TypeError(f"{cls.__name__}: field(s) {taken} are names of typed-record methods")
    cls._TYPED_NESTED = True

    def to_json(self) -> dict:
        return _fields_to_json(self)

    @classmethod
    def from_json(klass, data: dict, where: str = None):
        return _fields_from_json(klass, data, where or f"<{klass.__name__}>")

    cls.to_json = to_json
    cls.from_json = from_json
    return cls


def is_nested(tp) -> bool:
    return isinstance(tp, type) and getattr(tp, "_TYPED_NESTED", False)


def _codec(tp):
    """(decode, encode) for one annotation: a nested class, list[...], dict[str, ...] or X | None
    of one; None when the value stays plain JSON."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if is_nested(tp):
        return (lambda v, where: tp.from_json(v, where)), (lambda v: v.to_json())
    if origin in (typing.Union, pytypes.UnionType):
        inner = [_codec(a) for a in args if a is not type(None)]
        inner = [c for c in inner if c is not None]
        if len(inner) == 1:
            dec, enc = inner[0]
            return (lambda v, where: None if v is None else dec(v, where)), (lambda v: None if v is None else enc(v))
        return None
    if origin is list and args and (c := _codec(args[0])) is not None:
        dec, enc = c
        return (lambda v, where: [dec(x, f"{where}[{i}]") for i, x in enumerate(v)]), (lambda v: [enc(x) for x in v])
    if origin is dict and len(args) == 2 and (c := _codec(args[1])) is not None:
        dec, enc = c
        return (lambda v, where: {k: dec(x, f"{where}.{k}") for k, x in v.items()}), (lambda v: {k: enc(x) for k, x in v.items()})
    return None


def _codecs(cls) -> dict:
    """field name -> (decode, encode) for the fields that hold nested classes (cached per class)."""
    got = cls.__dict__.get("_typed_codecs")
    if got is None:
        hints = typing.get_type_hints(cls)
        got = {f.name: c for f in dataclasses.fields(cls) if (c := _codec(hints[f.name])) is not None}
        setattr(cls, "_typed_codecs", got)
    return got


def _fields_to_json(obj) -> dict:
    codecs, out = _codecs(type(obj)), {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is ABSENT:
            continue
        out[f.name] = codecs[f.name][1](value) if f.name in codecs else value
    return out


def _fields_from_json(klass, data: dict, where: str, skip=()):
    if not isinstance(data, dict):
        raise RecordError(where, f"{klass.__name__}: expected an object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(klass)}
    extra = sorted(set(data) - names - set(skip))
    if extra:
        raise RecordError(where, f"fields {extra} are not in {klass.__name__}")
    codecs = _codecs(klass)
    return klass(**{k: (codecs[k][0](v, f"{where}.{k}") if k in codecs else v) for k, v in data.items() if k in names})


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
            return {"schema_version": version, "kind": kind, **_fields_to_json(self)}

        @classmethod
        def from_json(klass, data: dict, where: str = None):
            where = where or f"<{kind} record>"
            if data.get("kind", kind) != kind:
                raise RecordError(where, f"kind {data.get('kind')!r}, expected {kind!r}")
            if data.get("schema_version") != version:
                raise RecordError(where, f"schema_version {data.get('schema_version')!r}, expected {version} "
                                         "(read older records through records.upgrade)")
            return _fields_from_json(klass, data, where, skip=("schema_version", "kind"))

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


_METHODS = frozenset({"to_json", "from_json", "digest", "KIND", "SCHEMA_VERSION", "_typed_codecs"})

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
