"""Event pieces to one event per line: Kineto's own separator by substring replacement, any
other spacing by the regex, and a nested "},\n  {" inside an event still parsed right."""

from __future__ import annotations

import pyarrow as pa
import pytest

from workflow_lib.importers import kineto_events as ke


def _kept(piece: bytes):
    ev = ke.parse_piece(piece)
    return ev.arr.filter(ev.table != 0)


def _event(i: int, extra: str = "") -> bytes:
    return (f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i}.0, "dur": 1.0, '
            f'"args": {{"correlation": {i}{extra}}}}}').encode()


@pytest.mark.parametrize("sep", [b",\n  ", b",", b", ", b",\n", b"\n,\n    ", b" ,\r\n\t"])
def test_any_separator_gives_every_event(sep):
    piece = sep.join(_event(i) for i in range(7))
    arr = _kept(piece)
    assert arr.field("name").to_pylist() == [f"k{i}" for i in range(7)]
    assert arr.field("args").field("correlation").to_pylist() == list(range(7))


def test_kineto_separator_inside_an_event_is_not_a_cut():
    # An args value holding objects laid out like Kineto's separator: the substring pass cuts it,
    # Arrow refuses the halves, and the fallbacks read the events whole.
    nested = ', "frames": [{"a": 1},\n  {"a": 2}]'
    piece = b",\n  ".join([_event(0), _event(1, nested), _event(2)])
    arr = _kept(piece)
    assert arr.field("name").to_pylist() == ["k0", "k1", "k2"]


def test_multiline_events_as_kineto_writes_them():
    ev = [b'{\n    "ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7,\n    "ts": %d.0, "dur": 1.0,\n'
          b'    "args": {\n      "correlation": %d\n    }\n  }' % (i, i, i) for i in range(4)]
    arr = _kept(b",\n  ".join(ev))
    assert arr.field("name").to_pylist() == ["k0", "k1", "k2", "k3"]


def test_a_wrong_cut_is_still_refused():
    with pytest.raises(ke.PieceRefused):
        ke.parse_piece(_event(0) + b",\n  " + _event(1)[:-5])


# The fast path reads with Arrow and no longer scans each piece for `true`/`false`: it relies on
# Arrow refusing a boolean in every numeric field it reads against EVENT. If a pyarrow ever reads
# `"ts": true` as 1 (pyarrow's own converter does), this fails.
@pytest.mark.parametrize("field", ["pid", "tid", "ts", "dur", "args.device", "args.stream", "args.correlation",
                                   "args.bytes", "args.grid", "args.block"])
@pytest.mark.parametrize("value", [b"true", b"false"])
def test_a_boolean_in_a_numeric_field_is_refused(field, value):
    from workflow_lib.core.errors import InputError

    if field.startswith("args."):
        key = field.split(".")[1]
        v = b"[%s]" % value if key in ("grid", "block") else value
        ev = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 1.0, "args": {"%s": %s}}' % (
            key.encode(), v)
    else:
        ev = _event(0).replace(b'"%s": ' % field.encode(), b'"%s": %s, "x": ' % (field.encode(), value), 1)
    with pytest.raises(Exception) as arrow:
        ke._read_lines(ev)
    assert "boolean" in str(arrow.value)
    if field in ("args.grid", "args.block"):  # the Python path drops a boolean dimension, as it always has
        assert _kept(_event(1) + b",\n  " + ev).field("args").field(field[5:]).to_pylist() == [None, []]
        return
    with pytest.raises(InputError, match="boolean, not a number"):
        ke.parse_piece(_event(1) + b",\n  " + ev)


def test_string_ids_take_arrow_not_the_python_path(monkeypatch):
    # Kineto's "Spans" row has pid/tid strings: renamed on Arrow's refusal, read by Arrow.
    monkeypatch.setattr(ke, "_convert", lambda events: pytest.fail("the json.loads path ran"))
    spans = b'{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0.0, "dur": 9.0}'
    arr = _kept(b",\n  ".join([_event(0), spans, _event(1)]))
    assert arr.field("name").to_pylist() == ["k0", "k1"]


def test_classify_keeps_complete_named_timed_events_of_known_categories():
    rows = [
        ("X", "Kernel", "a", 1.0), ("X", "GPU_MEMSET", "b", 2.0), ("X", "gpu_memcpy", "c", 3.0), ("X", "cuda_runtime", "d", 4.0),
        ("X", "cpu_op", "e", 5.0), ("B", "kernel", "f", 6.0), ("X", "ac2g", "g", 7.0), ("X", None, "h", 8.0),
        ("X", "kernel", None, 9.0), ("X", "kernel", "j", None), (None, "kernel", "k", 11.0),
    ]
    events = [{"ph": ph, "cat": cat, "name": n, "ts": ts} for ph, cat, n, ts in rows]
    ev = ke.classify(ke._convert(events))
    assert ev.table.tolist() == [ke.KERNEL_T, ke.COPY_T, ke.COPY_T, ke.RUNTIME_T, ke.HOST_T, 0, 0, 0, 0, 0, 0]
    assert ev.is_set.tolist() == [False, True] + [False] * 9
    assert ev.kept == 5
    assert ke.classify(pa.array([], type=ke.EVENT)).kept == 0
