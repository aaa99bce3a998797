"""The recorder's collectives source: PyTorch's NCCL flight recorder read at snapshot time.

torch is not installed on CPU machines, so torch.distributed and the dump function are
substituted (the edge we cannot reach); the dump bytes are a real pickle in the layout
torch writes (benchmarks/fr_builders.py), read through the restricted unpickler.
"""

import pickle

import pytest

from workflow_lib.capture.sources import collectives as C
from workflow_lib.core.incident import read_incident

from benchmarks import fr_builders


class FakeDist:
    def __init__(self, initialized=True, rank=1):
        self._init, self._rank = initialized, rank

    def is_available(self):
        return True

    def is_initialized(self):
        return self._init

    def get_rank(self):
        return self._rank


def _dump():
    return fr_builders.dump([fr_builders.entry(i, i, fr_builders.T0_NS + i * fr_builders.MS, duration_ms=1.0) for i in range(1, 6)], rank=1)


def _dump_bytes():
    return pickle.dumps(_dump())


def test_not_observed_without_torch_or_init_or_buffer(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    assert C.collect(None, 0)[1]["reason"].startswith("torch is not imported")
    assert "not initialized" in C.collect(None, 0, dist=FakeDist(initialized=False))[1]["reason"]
    for v in C.FR_ENV:
        monkeypatch.delenv(v, raising=False)
    table, src = C.collect(None, 0, dist=FakeDist(), dumper=_dump_bytes)
    assert table is None and src["status"] == "not_observed" and "TORCH_FR_BUFFER_SIZE" in src["reason"]


def test_dump_becomes_collectives_rows_on_the_monotonic_timeline(monkeypatch):
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    shift = 1_700_000_000_000_000_000
    table, src = C.collect(None, shift, dist=FakeDist(rank=1), dumper=_dump_bytes)
    assert src["status"] == "observed" and table.num_rows == 5
    assert set(table["rank"].to_pylist()) == {1}
    assert table["seq_id"].to_pylist() == [1, 2, 3, 4, 5]
    dump = _dump()
    assert table["enqueue_ns"].to_pylist()[0] == dump["entries"][0]["time_created_ns"] - shift


def test_hostile_dump_is_refused_not_executed(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    table, src = C.collect(0, 0, dist=FakeDist(), dumper=lambda: pickle.dumps({"entries": [Evil()]}))
    assert table is None and src["status"] == "not_observed" and "unreadable" in src["reason"]
    assert not marker.exists()


def test_recorder_snapshot_includes_collectives(monkeypatch, tmp_path):
    import sys
    import types

    from workflow_lib.capture import FlightRecorder

    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    monkeypatch.setenv("RANK", "1")
    fake_torch = types.ModuleType("torch")
    fake_dist = types.ModuleType("torch.distributed")
    for name in ("is_available", "is_initialized", "get_rank"):
        setattr(fake_dist, name, getattr(FakeDist(), name))
    fake_torch.distributed = fake_dist
    fake_torch._C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(_dump_nccl_trace=_dump_bytes))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake_dist)
    rec = FlightRecorder(incident_id="coll", incidents_dir=str(tmp_path), sources=("host", "collectives"))
    with rec:
        with rec.step(0):
            pass
        path = rec.snapshot("manual")
    inc = read_incident(path)
    assert inc.observed("collectives") and inc.table("collectives").num_rows == 5
    assert set(inc.table("steps")["rank"].to_pylist()) == {1}
