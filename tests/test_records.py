import json

import pytest

from workflow_lib.core import records
from workflow_lib.core.errors import RecordError

GOOD = {"schema_version": 1, "kind": "preflight", "block": "b000", "plan_digest": "a" * 64, "incident_id": "x",
        "experiment": None, "node": "n", "status": "pass", "differences": [], "missing": [], "environment": {}}


def test_write_then_read_validates(tmp_path):
    p = tmp_path / "r.json"
    d = records.write_record(p, GOOD, "preflight")
    assert d == records.digest_of(GOOD)
    assert records.read_record(p, "preflight") == GOOD


def test_schema_invalid_record_is_refused_and_nothing_written(tmp_path):
    p = tmp_path / "r.json"
    bad = dict(GOOD, status="maybe")
    with pytest.raises(RecordError, match="violates preflight schema at status"):
        records.write_record(p, bad, "preflight")
    assert not p.exists()
    assert list(tmp_path.iterdir()) == []  # no temp file left either


def test_nan_refused(tmp_path):
    with pytest.raises(RecordError, match="NaN"):
        records.write_record(tmp_path / "r.json", dict(GOOD, environment={"x": float("nan")}), "preflight")


@pytest.mark.parametrize("content,problem", [
    (b"{", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[1,2]", "expected a JSON object"),
    (json.dumps(dict(GOOD, kind="plan")).encode(), "violates preflight schema"),
    (b'{"a": NaN}', "not valid JSON"),
])
def test_bad_record_on_read_is_one_line_naming_file(tmp_path, content, problem):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(RecordError) as ei:
        records.read_record(p, "preflight")
    msg = ei.value.oneline()
    assert str(p) in msg and problem in msg and "\n" not in msg


def test_every_schema_is_valid_2020_12_and_versioned():
    from pathlib import Path

    for path in sorted(Path(records.SCHEMA_DIR).glob("*.schema.json")):
        kind = path.name.removesuffix(".schema.json")
        schema = records.load_schema(kind)
        assert schema["$schema"].endswith("2020-12/schema")
        if kind != "config":
            version = schema["properties"]["schema_version"]
            # const: one version; enum: the versions a reader still accepts (older records read)
            assert min(version.get("enum", [version.get("const", 0)])) >= 1, kind


def test_records_are_readable_by_others_per_umask(tmp_path):
    import os
    import stat

    p = tmp_path / "r.json"
    records.write_record(p, GOOD, "preflight")
    from workflow_lib.core.atomic import _umask

    assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~_umask()  # not mkstemp's 0600
