"""Per-layer syncs on consecutive steps (issue 34, diagnose/lead.py): a step that follows a step
with syncs starts without the lead the host had built, so the refill after its syncs is the
syncs' up to that lead too. Constructed truth from a simulated program run twice on the same
host and GPU costs, with and without the syncs: a forward whose host is slower than its kernels
(the lead built by earlier steps' backward covers it) and a backward whose long kernels let
the host gain. Without the syncs the GPU never idles in the forward (the twin shows it); with
them, every idle after a step's first sync is the syncs' consequence. Both directions: where
sync-free steps show no lead (the host is behind the GPU anyway), nothing is owed and the
idle stays host_submission's."""

from __future__ import annotations

import numpy as np

from tests import reference_diagnosis
from tests.builders import api, clock, kernel, make_incident, span, step
from tests.diagnose_crosscheck import assert_same
from tests.test_diagnose_consequence import MS, US, finding
from tests.test_diagnose_consequence import run as run_engine

SYNCED = (6, 7, 8)


def run(inc):
    """The engine's diagnosis, held equal to the per-step reference (both compute the owed lead)."""
    rec = run_engine(inc)
    assert_same(reference_diagnosis.diagnose(inc, incident_id="t", snapshot_digest="0" * 64), rec)
    return rec


def program(syncs: bool, backlog_us: int, backward_kernel_us: int, n_steps: int = 12, layers: int = 8):
    """(incident, per-step GPU idle after the step's first sync start (or its start)). Forward:
    `layers` x 4 ops of 100 us Python and a 60 us kernel; on SYNCED steps, after each layer a
    cudaStreamSynchronize (with `syncs`) and 150 us of logging Python (always). Backward: 16 ops
    of 20 us Python and a `backward_kernel_us` kernel. Step 0 opens with a `backlog_us` kernel."""
    steps, kernels, rt, spans = [], [], [], []
    t, corr, gpu_free = 0, 1, 0
    first_sync = {}

    def launch(us):
        nonlocal t, corr, gpu_free
        rt.append(api(t, t + 10 * US, corr=corr))
        ks = max(t + 10 * US, gpu_free)
        kernels.append(kernel(ks, ks + us * US, corr=corr))
        gpu_free, corr, t = ks + us * US, corr + 1, t + 10 * US

    for i in range(n_steps):
        t0 = t
        if i == 0 and backlog_us:
            launch(backlog_us)
        for layer in range(layers):
            for _ in range(4):
                spans.append(span("op", t, t + 100 * US, depth=1))
                t += 100 * US
                launch(60)
            if i in SYNCED:
                if syncs:
                    end = max(gpu_free, t + 5 * US)
                    first_sync.setdefault(i, t)
                    rt.append(api(t, end, name="cudaStreamSynchronize", is_sync=True))
                    t = end + 5 * US
                spans.append(span("log", t, t + 150 * US, depth=1))
                t += 150 * US
        for _ in range(16):
            spans.append(span("grad", t, t + 20 * US, depth=1))
            t += 20 * US
            launch(backward_kernel_us)
        steps.append(step(i, t0, t))
    inc = make_incident(steps=steps, kernels=kernels, runtime_api=rt, spans=spans, clock_sync=[clock(0, 1 * US)])
    ks = np.array([(k["start_ns"], k["end_ns"]) for k in kernels])
    idle = {}
    for s in steps:
        lo, hi = first_sync.get(s["step_id"], s["start_ns"]), s["end_ns"]
        busy = np.clip(ks[:, 1], lo, hi) - np.clip(ks[:, 0], lo, hi)
        idle[s["step_id"]] = hi - lo - int(busy.sum())  # kernels never overlap here
    return inc, idle


def test_the_refill_after_a_run_of_synced_steps_is_the_syncs():
    # The host gains 2.72 ms in each backward and loses 2.8 ms in a logged forward: steps start
    # ~5 ms ahead (the backlog), so without the syncs the GPU never idles on the logged steps.
    _, twin = program(syncs=False, backlog_us=5000, backward_kernel_us=190)
    assert all(twin[s] < 20 * US for s in SYNCED), twin
    inc, idle = program(syncs=True, backlog_us=5000, backward_kernel_us=190)
    rec = run(inc)
    for sid in SYNCED:
        f = finding(rec, "sync_stall", sid)
        assert f["verdict"] == "attributed"
        # The idle after the step's first sync, all the syncs' (the twin has none), never more.
        assert 0.97 * idle[sid] <= f["explains_ns"] <= idle[sid], (sid, f["explains_ns"], idle[sid], f["evidence"])
        assert finding(rec, "host_submission", sid)["explains_ns"] <= 0.03 * idle[sid]
    # The run's first step found the host's own lead and took it (lead_lost): nothing owed there;
    # the next ones started short of the sync-free steps' lead.
    assert "lead_owed_ns" not in finding(rec, "sync_stall", 6)["evidence"]
    assert all(finding(rec, "sync_stall", s)["evidence"]["lead_owed_ns"] > 2 * MS for s in (7, 8))


def test_nothing_is_owed_where_sync_free_steps_show_no_lead():
    """The other direction: no backlog and a backward that gains nothing (its kernels are as
    short as its Python): the host is behind the GPU in every step, so without the syncs the
    GPU would idle in the logging too. The syncs get only the lead they took (their own waits
    on each layer's last kernel, ~55 us a layer); host_submission keeps the logging's idle."""
    inc, idle = program(syncs=True, backlog_us=0, backward_kernel_us=20)
    rec = run(inc)
    for sid in (7, 8):
        f = finding(rec, "sync_stall", sid)
        assert "lead_owed_ns" not in f["evidence"]
        assert f["explains_ns"] <= 8 * 70 * US, (sid, f["explains_ns"], f["evidence"])
        assert finding(rec, "host_submission", sid)["explains_ns"] >= 8 * 150 * US
