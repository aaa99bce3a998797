"""Incidents with injected, known causes.

GPU fixtures (captured on an H200 by examples/gpu/capture_incidents.py) are read when they
are committed under tests/fixtures/capture/; the CPU twin runs the same loop and the same
injections with a NumPy backend and checks that the recorder sees each cause where it was
put."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from workflow_lib.core.incident import read_incident

from capture_helpers import recorder

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "capture"
_spec = importlib.util.spec_from_file_location("capture_incidents", ROOT / "examples" / "gpu" / "capture_incidents.py")
ci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci)


class NumpyBackend:
    """Same shape of work as TorchBackend, on the CPU, small."""

    layers = [0, 1, 2, 3]

    def __init__(self):
        rng = np.random.default_rng(0)
        self.w = [rng.standard_normal((64, 64)).astype(np.float32) for _ in self.layers]

    def make_batch(self):
        return np.ones((32, 64), np.float32)

    def forward(self, x, rec, sync_each_layer):
        for w in self.w:
            x = np.tanh(x @ w)
            if sync_each_layer:
                with rec.span("sync.item"):
                    float(x.sum())
        return x

    def backward(self, loss):
        return None

    def optimizer(self):
        return None

    def sync(self):
        return None

    def item(self, loss):
        return float(loss.mean())


def _run(tmp_path, scenario, steps=40, inject=range(20, 25), gap_ms=12.0, starve_ms=15.0):
    rec = recorder(tmp_path, incident_id=scenario.replace("_", "-"), sources=("host", "sched"))
    with rec:
        truth = ci.run_loop(NumpyBackend(), rec, scenario, steps, set(inject), gap_ms, starve_ms)
        path = rec.snapshot("workload_boundary")
    inc = read_incident(path)
    return truth, inc.table("spans").to_pandas(), inc.table("steps").to_pandas()


def _step_of(spans, steps):
    idx = np.searchsorted(steps["start_ns"].to_numpy(), spans["start_ns"].to_numpy(), side="right") - 1
    return steps["step_id"].to_numpy()[idx]


def test_cpu_twin_host_gap(tmp_path):
    truth, spans, steps = _run(tmp_path, "host_gap")
    gap = spans[spans.name == "host.cpu_gap"]
    assert sorted(_step_of(gap, steps)) == truth["injected_steps"] == [20, 21, 22, 23, 24]
    assert ((gap.end_ns - gap.start_ns) >= 12e6).all()
    dur = (steps.end_ns - steps.start_ns).to_numpy()
    assert np.median(dur[20:25]) > 12e6 > np.median(dur[:20])


def test_cpu_twin_blocking_sync(tmp_path):
    truth, spans, steps = _run(tmp_path, "blocking_sync")
    s = spans[spans.name.isin(["sync.item", "sync.cuda_synchronize"])]
    per_step = s.assign(step=_step_of(s, steps)).groupby("step").size().to_dict()
    assert per_step == {i: truth["syncs_per_injected_step"] for i in truth["injected_steps"]}


def test_cpu_twin_starved_queue(tmp_path):
    truth, spans, steps = _run(tmp_path, "starved_queue")
    w = spans[spans.name == "dataloader.queue_wait"].assign(ms=lambda d: (d.end_ns - d.start_ns) / 1e6)
    w = w.assign(step=_step_of(w, steps))
    starved = w[(w.step >= 20) & (w.step < 30)].ms.sum()
    healthy = w[w.step < 15].ms.sum()
    # Five batches 15 ms late, less what the 4-deep queue absorbs.
    assert starved > 0.7 * 5 * 15 and healthy < 10
    assert truth["queue_threshold"] == ci.QUEUE_THRESHOLD
    assert all(v <= ci.QUEUE_MAX for v in truth["queue_depth_at_get"].values())


GPU_FIXTURES = sorted(p for p in FIXTURES.glob("*") if (p / "manifest.json").exists()) if FIXTURES.is_dir() else []


@pytest.mark.gpu
@pytest.mark.skipif(not GPU_FIXTURES, reason="H200 fixtures not captured yet (run examples/gpu/capture_incidents.py on a GPU); CPU twins above cover the loop")
@pytest.mark.parametrize("path", GPU_FIXTURES, ids=lambda p: p.name)
def test_gpu_fixture_shows_its_cause(path):
    inc = read_incident(path)
    truth_file = path / "truth.json" if (path / "truth.json").exists() else next(path.glob("truth.*.json"))
    truth = json.loads(truth_file.read_text())
    spans, steps = inc.table("spans").to_pandas(), inc.table("steps").to_pandas()
    names = truth["span"] if isinstance(truth["span"], list) else [truth["span"]]
    hit = spans[spans.name.isin(names)]
    assert len(hit) > 0
    assert set(_step_of(hit, steps)) & set(truth["injected_steps"])
    assert inc.manifest["sources"]["nvml"]["status"] == "observed"
