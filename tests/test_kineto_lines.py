"""Event pieces to one event per line: Kineto's own separator by substring replacement, any
other spacing by the regex, and a nested "},\n  {" inside an event still parsed right."""

from __future__ import annotations

import pytest

from workflow_lib.importers import kineto_events as ke


def _event(i: int, extra: str = "") -> bytes:
    return (f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i}.0, "dur": 1.0, '
            f'"args": {{"correlation": {i}{extra}}}}}').encode()


@pytest.mark.parametrize("sep", [b",\n  ", b",", b", ", b",\n", b"\n,\n    ", b" ,\r\n\t"])
def test_any_separator_gives_every_event(sep):
    piece = sep.join(_event(i) for i in range(7))
    arr = ke.parse_piece(piece)
    assert arr.field("name").to_pylist() == [f"k{i}" for i in range(7)]
    assert arr.field("args").field("correlation").to_pylist() == list(range(7))


def test_kineto_separator_inside_an_event_is_not_a_cut():
    # An args value holding objects laid out like Kineto's separator: the substring pass cuts it,
    # Arrow refuses the halves, and the fallbacks read the events whole.
    nested = ', "frames": [{"a": 1},\n  {"a": 2}]'
    piece = b",\n  ".join([_event(0), _event(1, nested), _event(2)])
    arr = ke.parse_piece(piece)
    assert arr.field("name").to_pylist() == ["k0", "k1", "k2"]


def test_multiline_events_as_kineto_writes_them():
    ev = [b'{\n    "ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7,\n    "ts": %d.0, "dur": 1.0,\n'
          b'    "args": {\n      "correlation": %d\n    }\n  }' % (i, i, i) for i in range(4)]
    arr = ke.parse_piece(b",\n  ".join(ev))
    assert arr.field("name").to_pylist() == ["k0", "k1", "k2", "k3"]


def test_a_wrong_cut_is_still_refused():
    with pytest.raises(ke.PieceRefused):
        ke.parse_piece(_event(0) + b",\n  " + _event(1)[:-5])
