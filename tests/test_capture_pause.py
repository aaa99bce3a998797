"""FlightRecorder.pause()/resume(): recording stops and restarts at step boundaries while the
recorder's threads stay alive (what benchmarks/overhead_inprocess.py switches in windows).
The CUPTI binding is the fake of test_capture_cupti; everything else is the real recorder."""

from __future__ import annotations

import time

from workflow_lib.capture import FlightRecorder
from workflow_lib.capture.sources import cupti as cupti_mod
from workflow_lib.core.incident import read_incident

from test_capture_cupti import CUPTI_BASE_NS, FakeCupti, _records


def test_paused_steps_are_not_recorded_and_an_open_step_is_recorded_whole(tmp_path):
    rec = FlightRecorder(incident_id="p", incidents_dir=str(tmp_path), sources=("host", "sched"))
    with rec:
        cached = rec.span  # a span lookup held across the pause, as loops often do
        for i in range(30):
            with rec.step(i):
                if i == 19:
                    rec.resume()  # inside paused step 19: recording starts with step 20
                if i == 10:
                    rec.pause()  # inside step 10: takes effect at its end, the step is kept whole
                with rec.span("fwd"):
                    time.sleep(0.001)
                with cached("held"):
                    pass
        assert rec.sched._thread.is_alive()
        path = rec.snapshot("workload_boundary")
    inc = read_incident(path)
    steps = inc.table("steps").to_pandas().sort_values("step_id")
    assert list(steps["step_id"]) == list(range(11)) + list(range(20, 30))
    spans = inc.table("spans").to_pandas()
    counts = spans["name"].value_counts().to_dict()
    # Step 10's spans are all kept; "held" spans that began while paused were written through
    # the held lookup and are left out by the paused interval.
    assert counts["fwd"] == 21 and counts["held"] == 21
    rep = inc.manifest["recorder"]
    assert rep["span_path"] in ("c", "python")
    (a, b), = rep["paused"]["intervals"]
    assert a < b and not rep["paused"]["now"]
    # Every step lies wholly outside the paused interval; durations only of recorded steps.
    assert ((steps["end_ns"] <= b) | (steps["start_ns"] >= b)).all()
    assert len(rec.steps_out_record().steps_ns) == 21


def test_paused_samplers_keep_their_thread_and_take_no_sample(tmp_path):
    rec = FlightRecorder(incident_id="s", incidents_dir=str(tmp_path), sources=("host", "sched"))
    rec.sched.period_s = 0.01
    with rec:
        time.sleep(0.1)
        rec.pause()
        time.sleep(0.05)  # a sample already under way when pause() ran may still land
        n = rec.sched.samples
        time.sleep(0.2)
        assert rec.sched.samples == n and rec.sched._thread.is_alive()
        rec.resume()
        time.sleep(0.2)
        assert rec.sched.samples > n


def test_pause_disables_cupti_and_resume_enables_it_again(tmp_path, monkeypatch):
    fake = FakeCupti()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    rec = FlightRecorder(incident_id="c", incidents_dir=str(tmp_path), sources=("host", "cupti"), cupti_mode="always")
    seen = {}
    with rec:
        for i in range(30):
            if i == 10:
                rec.pause()
            if i == 20:
                rec.resume()
            with rec.step(i):
                seen[i] = bool(fake.enabled)
                if fake.enabled:
                    fake.completed(_records(time.monotonic_ns() + CUPTI_BASE_NS))
                time.sleep(0.001)
        path = rec.snapshot("workload_boundary")
    assert [i for i, on in seen.items() if not on] == list(range(10, 20))
    cu = read_incident(path).manifest["sources"]["cupti"]
    assert cu["status"] == "observed" and len(cu["detail"]["windows"]) == 2


def test_pause_is_a_no_op_when_the_recorder_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv("STALLCASE_RECORDER", "off")
    rec = FlightRecorder(incident_id="o", incidents_dir=str(tmp_path))
    with rec:
        rec.pause()
        with rec.step(0):
            pass
        rec.resume()
    assert not rec.paused and rec.steps_out_record().steps_ns != []


def test_steps_iterator_pauses_at_its_step_boundaries(tmp_path):
    rec = FlightRecorder(incident_id="it", incidents_dir=str(tmp_path), sources=("host",))
    with rec:
        for i, batch in enumerate(rec.steps(range(12))):
            if i == 3:
                rec.pause()  # inside step 3 of the iterator: step 3 is recorded whole
            if i == 7:
                rec.resume()  # inside paused step 7: recording starts with step 8
            time.sleep(0.001)
        path = rec.snapshot("workload_boundary")
    steps = read_incident(path).table("steps").to_pandas()
    assert sorted(steps["step_id"]) == [0, 1, 2, 3, 8, 9, 10, 11]


def test_cupti_kind_sets_and_parser_are_checked():
    import pytest

    assert cupti_mod.cupti_kinds_of("kernel") == ("CONCURRENT_KERNEL",)
    assert cupti_mod.cupti_kinds_of("MEMCPY, RUNTIME") == ("MEMCPY", "RUNTIME")
    assert cupti_mod.cupti_kinds_of(None) is None
    with pytest.raises(ValueError, match="unknown activity kind"):
        FlightRecorder(sources=("host", "cupti"), cupti_kinds="kernels")
    with pytest.raises(ValueError, match="parser"):
        FlightRecorder(sources=("host", "cupti"), cupti_parser="fast")


def test_the_manifest_says_which_span_path_ran(tmp_path):
    """A child process per path: STALLCASE_SPAN_PATH=python forces the pure-Python span and step."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from workflow_lib.capture.sources import host

    root = Path(__file__).resolve().parents[1]
    prog = ("import sys; from workflow_lib.capture import FlightRecorder\n"
            "rec = FlightRecorder(incident_id='sp', incidents_dir=sys.argv[1], sources=('host',))\n"
            "with rec:\n"
            "    with rec.step(0):\n"
            "        with rec.span('x'):\n"
            "            pass\n"
            "    print(rec.snapshot('workload_boundary'))\n")
    got = {}
    for forced in (None, "python"):
        env = {k: v for k, v in os.environ.items() if k != "STALLCASE_SPAN_PATH"}
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
        if forced:
            env["STALLCASE_SPAN_PATH"] = forced
        out = tmp_path / (forced or "default")
        p = subprocess.run([sys.executable, "-c", prog, str(out)], env=env, capture_output=True, text=True, check=True)
        manifest = json.loads((Path(p.stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
        got[forced] = manifest["recorder"]["span_path"], manifest["recorder"]["step_path"]
    from workflow_lib.capture import cext

    step_default = "c" if cext.step is not None else "python"
    assert got == {None: (host.SPAN_PATH, step_default), "python": ("python", "python")}
