"""Records' pretty layout: byte for byte json.dumps(indent=2) for small values, one element per
line for long arrays, and the same value when read back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workflow_lib.core import json_pretty, records

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=4), kids, max_size=5),
    max_leaves=40)


def _reference(value) -> str:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(value=_values)
def test_small_values_are_laid_out_as_json_dumps_indent_2(value):
    assert json_pretty.dumps(value) == _reference(value)


@pytest.mark.parametrize("seed", range(5))
def test_long_arrays_read_back_equal_one_element_per_line(seed):
    import random
    rng = random.Random(seed)
    items = [rng.choice([None, True, 1.5, -3, "tëxt", {"b": [1, {"c": None}], "a": "x\ny"}, [1, [2, []]], {}])
             for _ in range(json_pretty.LONG_ARRAY + 1 + rng.randrange(100))]
    rec = {"steps": items, "summary": {"n": len(items), "é": "ünïcode"}}
    text = json_pretty.dumps(rec)
    assert json.loads(text) == rec
    lines = text.splitlines()
    start = lines.index('  "steps": [')
    assert len(lines[start + 1:start + 1 + len(items)]) == len(items)
    assert all(line.startswith("    ") and "\n" not in line for line in lines[start + 1:start + 1 + len(items)])


def test_nan_is_refused():
    with pytest.raises(ValueError):
        json_pretty.dumps({"x": [float("nan")] * 100})


def test_written_record_reads_back_with_the_same_digest(tmp_path):
    rec = {"schema_version": 1, "kind": "collectives", "x": list(range(200))}
    path = tmp_path / "r.json"
    text = json_pretty.dumps(rec) + "\n"
    path.write_text(text, encoding="utf-8")
    assert records.digest_of(json.loads(path.read_text(encoding="utf-8"))) == records.digest_of(rec)


def _long_record(seed: int) -> dict:
    import random
    rng = random.Random(seed)
    one = lambda: rng.choice([None, True, 1.5, -3, "tëxt", {"b": [1, {"c": None}], "a": "x\ny"}, [1, [2, []]], {}, ()])  # noqa: E731
    n = json_pretty.BATCH * 2 + rng.randrange(50)  # more than one streamed piece, the last one partial
    return {"steps": [one() for _ in range(n)], "nested": {"ops": [one() for _ in range(json_pretty.LONG_ARRAY + 3)]},
            "short": [one() for _ in range(3)], "é": "ünïcode", "kind": "collectives", "schema_version": 1}


@settings(max_examples=150, deadline=None)
@given(value=_values)
def test_canonical_pieces_are_canonical_bytes(value):
    assert "".join(json_pretty.canonical_chunks(value)).encode("utf-8") == records.canonical_bytes(value)


@pytest.mark.parametrize("seed", range(3))
def test_long_arrays_stream_the_same_text_and_canonical_bytes(seed):
    rec = _long_record(seed)
    pieces = list(json_pretty.chunks(rec))
    assert len(pieces) > 3  # streamed, not one string
    assert "".join(pieces) == json_pretty.dumps(rec)
    lines = json_pretty.dumps(rec).splitlines()
    start = lines.index('  "steps": [')
    # one element per line, exactly as before the pieces: C-encoded, four spaces in
    want = ",\n".join("    " + json_pretty._ONE_LINE.encode(v) for v in rec["steps"]).splitlines()
    assert lines[start + 1:start + 1 + len(rec["steps"])] == want
    assert "".join(json_pretty.canonical_chunks(rec)).encode("utf-8") == records.canonical_bytes(rec)


def test_write_record_streams_the_pretty_text_and_returns_the_canonical_digest(tmp_path, monkeypatch):
    rec = _long_record(7)
    monkeypatch.setattr(records, "validate", lambda *a, **k: None)  # layout only; schemas are tested elsewhere
    path = tmp_path / "r.json"
    digest = records.write_record(path, rec, "collectives")
    assert path.read_text(encoding="utf-8") == json_pretty.dumps(rec) + "\n"
    assert digest == records.digest_of(rec)
