"""In-process capture without torch: the runner, the session's end, the program's own
FlightRecorder joining the run's incident, and the end-of-run announcement of an automatic
snapshot. (With torch, end to end: tests/test_zero_change_e2e.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from pathlib import Path

from workflow_lib.capture.inprocess.runner import is_python_command
from workflow_lib.core.incident import read_incident

ROOT = Path(__file__).resolve().parent.parent

OWN_RECORDER = """
    import time
    from workflow_lib.capture import FlightRecorder

    rec = FlightRecorder(incident_id="programs-own-id")
    with rec:
        for i in range(60):
            with rec.step(i):
                with rec.span("work"):
                    time.sleep(0.060 if i == 45 else 0.004)
        print("snapshot at", rec.snapshot("workload_boundary"))
"""

PLAIN = """
    import gc, time
    junk = []
    for i in range(20):
        junk.append([{"me": None} for _ in range(5000)])
        for d in junk[-1]:
            d["me"] = d
        if len(junk) > 2:
            junk.pop(0)
    gc.collect()
    time.sleep(0.05)
"""


def _record(tmp_path, program: str, incident: str, *extra):
    (tmp_path / "prog.py").write_text(textwrap.dedent(program))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLCASE_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "workflow_lib.cli", "record", "--incident", incident,
                           "--incidents-dir", str(tmp_path / "inc"), *extra, "--", sys.executable, "prog.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_python_and_torchrun_commands_are_recorded_in_process():
    assert is_python_command(["python3", "x.py"]) and is_python_command(["/v/bin/python3.11", "-m", "pkg"])
    assert is_python_command(["/v/bin/torchrun", "--nproc_per_node", "2", "t.py"])
    assert not is_python_command(["./train.sh"]) and not is_python_command(["pythonic"])


def test_the_programs_own_recorder_joins_the_one_incident_and_the_latency_snapshot_is_announced(tmp_path):
    r = _record(tmp_path, OWN_RECORDER, "own")
    assert r.returncode == 0, r.stderr
    dirs = sorted(p.name for p in (tmp_path / "inc").iterdir())
    # One incident of the run (the program's id joined it) and the automatic snapshot beside it.
    assert dirs[0] == "own" and all(d.startswith("own.latency_change-") for d in dirs[1:]) and len(dirs) == 2, dirs
    inc = read_incident(tmp_path / "inc" / "own")
    m = inc.manifest
    assert m["reason"] == "workload_boundary" and m["recorder"]["steps"]["from"] == "program"
    assert m["incident_id"] == "own"
    assert len(inc.table("steps")) == 60 and (inc.table("spans").to_pandas().name == "work").sum() == 60
    assert f"incident {tmp_path / 'inc' / 'own'} (workload_boundary" in r.stderr
    auto = tmp_path / "inc" / dirs[1]
    assert f"automatic snapshot {auto} (latency_change: step " in r.stderr and "x the median" in r.stderr, r.stderr


def test_a_program_without_steps_is_one_step_with_its_gc_collections(tmp_path):
    r = _record(tmp_path, PLAIN, "plain")
    assert r.returncode == 0, r.stderr
    inc = read_incident(tmp_path / "inc" / "plain")
    assert inc.manifest["recorder"]["steps"]["from"] == "process" and len(inc.table("steps")) == 1
    d = inc.table("span_details").to_pandas()
    full = d[(d.name == "gc.collect") & (d.generation == 2)]
    assert len(full) >= 1 and full.objects.max() >= 5000  # gc.collect() freed the last lists' cycles


def test_outside_keeps_the_sidecar(tmp_path):
    r = _record(tmp_path, PLAIN, "side", "--outside")
    assert r.returncode == 0, r.stderr
    assert "no --step-pattern" in r.stderr
    assert read_incident(tmp_path / "inc" / "side").manifest["producer"] == "sidecar"


PROFILED_INFERENCE = """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    model = torch.nn.Linear(32, 32)
    x = torch.randn(64, 32)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU],
                                  schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
        for i in range(8):
            with record_function("decode"):
                model(x)
            prof.step()
"""


def test_without_an_optimizer_the_programs_profiler_steps_are_the_steps(tmp_path):
    import pytest

    pytest.importorskip("torch", reason="torch (CPU) is not installed: pip install torch==2.13.0")
    r = _record(tmp_path, PROFILED_INFERENCE, "prof")
    assert r.returncode == 0, r.stderr
    inc = read_incident(tmp_path / "inc" / "prof")
    assert inc.manifest["recorder"]["steps"]["from"] == "profiler_step"
    steps = inc.table("steps").to_pandas()
    assert sorted(steps.step_id) == list(range(len(steps))) and len(steps) >= 7
    names = inc.table("spans").to_pandas().name
    assert (names == "decode").sum() == 8  # the program's own record_function names are spans


WORKERS_RECORD_THEMSELVES = """
    import multiprocessing as mp, os, time
    from workflow_lib.capture import FlightRecorder


    def work(rank):
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), "2"
        rec = FlightRecorder(incident_id="workers")
        with rec:
            for i in range(10):
                with rec.step(i):
                    time.sleep(0.002)
            rec.snapshot("workload_boundary")


    if __name__ == "__main__":
        ps = [mp.get_context("fork").Process(target=work, args=(r,)) for r in range(2)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
"""


def test_forked_workers_with_their_own_recorders_make_the_one_incident(tmp_path):
    r = _record(tmp_path, WORKERS_RECORD_THEMSELVES, "mpw")
    assert r.returncode == 0, r.stderr
    dirs = sorted(p.name for p in (tmp_path / "inc").iterdir() if ".latency_change-" not in p.name and p.name[0] != ".")
    assert dirs == ["mpw"], (dirs, r.stderr)  # the parent, which stepped nothing, adds no second one
    inc = read_incident(tmp_path / "inc" / "mpw")
    assert inc.manifest["ranks"] == [0, 1]
    assert inc.table("steps").to_pandas().groupby("rank").size().to_dict() == {0: 10, 1: 10}


WHOLE_MODEL_SAVE = """
    import copy, pickle
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(6):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with open("model.pt", "wb") as f:  # as PyTorch's word_language_model does each epoch
            torch.save(model, f)
    # the other ways a program pickles or copies its model: its own pickle, an EMA copy
    kept = pickle.loads(pickle.dumps(model))
    ema = copy.deepcopy(model)
    print("copies' hooks:", len(kept._forward_hooks), len(kept._forward_pre_hooks), len(ema._forward_hooks),
          len(ema._forward_hooks_always_called), float((kept(torch.ones(1, 8)) - model(torch.ones(1, 8))).abs().sum()))
    print("forward hooks after the saves:", len(model._forward_hooks), len(model._forward_pre_hooks))
"""


def test_saving_a_whole_model_does_not_carry_the_recorders_hooks(tmp_path):
    # torch.save(model), pickle.dumps(model) and copy.deepcopy(model) pickle the module with its
    # hooks; the recorder's forward hooks on the roots are closures: none may fail, and none may
    # carry them into the program's file or copy.
    pytest.importorskip("torch")
    p = _record(tmp_path, WHOLE_MODEL_SAVE, "whole-save")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "forward hooks after the saves: 1 1" in p.stdout  # the live model keeps its hooks
    assert "copies' hooks: 0 0 0 0 0.0" in p.stdout, p.stdout  # pickle.dumps and deepcopy: none of ours
    # Loaded where stallcase is not: the file holds the model and nothing of the recorder's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLCASE_") and k != "PYTHONPATH"}
    q = subprocess.run([sys.executable, "-c",
                        "import sys, torch; sys.modules['workflow_lib'] = None; "
                        "m = torch.load('model.pt', weights_only=False); "
                        "print(len(m._forward_hooks), len(m._forward_pre_hooks), m(torch.zeros(1, 8)).shape)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert q.returncode == 0, q.stderr[-2000:]
    assert q.stdout.split()[:2] == ["0", "0"], q.stdout
    assert "steps from optimizer: 6" in p.stderr + p.stdout, p.stderr[-1000:]
