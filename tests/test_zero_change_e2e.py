"""Zero-change capture, end to end: a user's program with no stallcase import
(tests/zero_change_program.py: its own package in its own git repository, a DataLoader with a
worker process, an MLP, SGD, reference cycles that automatic GC collects, torch.save every 6
steps) is recorded by `stallcase record -- python prog.py` and by `stallcase record --
torchrun --nproc_per_node 2 prog.py` (gloo). Each run must give ONE incident whose steps come
from the optimizer's steps, with the loader's waits, GC collections (generation and objects in
span_details) and checkpoint saves (bytes) as spans; then the README's pipeline, with a config
written as the README says, reaches a verdict on the first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch (CPU) is not installed: pip install torch==2.13.0")

from workflow_lib.core import records  # noqa: E402
from workflow_lib.core.incident import read_incident  # noqa: E402

from e2e_design import trials_yaml  # noqa: E402
from zero_change_program import FILES, make_project  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ARGS = ["--steps", "18", "--records", "3000", "--item-ms", "4"]
VERDICTS = {"faster", "slower", "no_change", "inconclusive"}


def _sh(argv, cwd, env, timeout=600):
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{(proc.stdout + proc.stderr)[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("zero-change")
    repo = make_project(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALLCASE_", "TORCHELASTIC_", "SLURM_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    py = _sh([BIN / "stallcase", "record", "--incident", "zc-py", "--", sys.executable, "prog.py", *ARGS], repo, env)
    tr = _sh([BIN / "stallcase", "record", "--incident", "zc-ddp", "--", BIN / "torchrun", "--standalone",
              "--nproc_per_node", "2", "prog.py", *ARGS[:2], "--records", "1500"], repo, env)
    return {"root": root, "repo": repo, "env": env, "py": py, "ddp": tr}


def _spans(inc, name):
    t = inc.table("spans").to_pandas()
    return t[t.name == name]


def _one_incident(world, incident):
    names = sorted(p.name for p in (world["repo"] / "incidents").iterdir() if p.name.startswith(incident))
    # One incident per run, never two (an automatic latency-change snapshot goes beside it).
    assert [n for n in names if ".latency_change-" not in n] == [incident], names
    return read_incident(world["repo"] / "incidents" / incident)


@pytest.mark.slow
def test_the_program_has_no_stallcase_in_it():
    assert not any("stallcase" in text or "workflow_lib" in text for text in FILES.values())


@pytest.mark.slow
def test_python_run_is_one_incident_with_optimizer_steps_waits_gc_and_checkpoints(world):
    inc = _one_incident(world, "zc-py")
    m = inc.manifest
    assert m["recorder"]["steps"]["from"] == "optimizer"
    assert "incident" in world["py"].stderr and "steps from optimizer: 18" in world["py"].stderr
    steps = inc.table("steps").to_pandas()
    assert sorted(steps.step_id) == list(range(18))
    # A step is the whole iteration: each starts where the previous ended, the loader's wait inside it.
    s = steps.sort_values("step_id")
    assert (s.start_ns.values[1:] == s.end_ns.values[:-1]).all()
    waits = _spans(inc, "dataloader.next")
    assert len(waits) >= 18 and waits.start_ns.min() >= s.start_ns.min()
    for name in ("forward", "backward", "optimizer.step"):
        assert len(_spans(inc, name)) >= 17, name
    assert len(_spans(inc, "gc.collect")) > 0 and len(_spans(inc, "checkpoint.save")) == 3
    d = inc.table("span_details").to_pandas()
    gc = d[d.name == "gc.collect"]
    assert gc.generation.max() == 2 and gc.objects.sum() > 10_000, gc.describe()  # real collections of cycles
    ck = d[d.name == "checkpoint.save"]
    size = (world["repo"] / "checkpoints" / "last.pt").stat().st_size
    assert len(ck) == 3 and (ck.bytes == size).all()
    argv = m["workload"]["argv"]  # the trials rerun the program under the same capture
    assert argv[1:3] == ["-m", "workflow_lib.capture.run"] and "--" not in argv and argv[-len(ARGS) - 1:] == ["prog.py", *ARGS]
    hooks = " ".join(m["recorder"]["inprocess"]["hooks"])
    assert "optimizer" in hooks and "gc.callbacks" in hooks and "torch.save" in hooks


@pytest.mark.slow
def test_torchrun_run_is_one_incident_of_both_ranks(world):
    inc = _one_incident(world, "zc-ddp")
    m = inc.manifest
    assert m["ranks"] == [0, 1] and m["recorder"]["steps"]["from"] == "optimizer"
    assert any(Path(a).name == "torchrun" for a in m["workload"]["argv"])
    steps = inc.table("steps").to_pandas()
    assert steps.groupby("rank").size().to_dict() == {0: 18, 1: 18}
    spans = inc.table("spans").to_pandas()
    by = spans.groupby(["rank", "name"]).size()
    for rank in (0, 1):
        assert by[(rank, "dataloader.next")] >= 18 and by[(rank, "gc.collect")] > 0
        assert by[(rank, "c10d.all_reduce")] == 18 * 4  # weight and bias of two layers, every step
    assert by[(0, "checkpoint.save")] == 3 and (1, "checkpoint.save") not in by.index  # rank 0 saves


@pytest.mark.slow
def test_the_readme_pipeline_reaches_a_verdict(world):
    root, repo, env = world["root"], world["repo"], world["env"]
    checkout = root / "stallcase"
    checkout.mkdir()
    for name in ("Snakefile", "rules", "profiles", "config", "schemas", "workflow_lib", "docs", "examples"):
        (checkout / name).symlink_to(ROOT / name)
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    # Any verdict will do (this times nothing): two blocks at 50%, the fewest that can conclude there.
    trials = trials_yaml("name: iteration_time, source: auto, per: step, statistic: median, skip_steps: 3, unit: ns",
                         record_runs=False, blocks=2, confidence=0.5)
    (checkout / "my.yaml").write_text(textwrap.dedent(f"""
        incidents_dir: {repo / 'incidents'}
        allow_roots: [{repo}]
        candidate:
          set_args: {{"--item-ms": "0"}}
    """) + trials)
    _sh([".venv/bin/snakemake", "--cores", "2", "--profile", "profiles/local", "--configfile", "my.yaml",
         "--config", "incident=zc-py"], checkout, env, timeout=900)
    res = (checkout / "results" / "zc-py").resolve()
    c = records.read_record(res / "comparison.json", "comparison")
    assert c["verdict"] in VERDICTS, c
    plan = records.read_record(res / "plan.json", "plan")
    assert plan["design"]["metric"]["source"] in ("auto", "recorder_steps")
    runs = [r for p in sorted((res / "execution").glob("*.json")) for r in records.read_record(p, "execution")["runs"]]
    assert runs and all(r["status"] == "ok" and r["metric_source"] == "recorder_steps" for r in runs), runs[:2]
    diag = records.read_record(res / "diagnosis.json", "diagnosis")
    assert diag["summary"]
    shutil.rmtree(checkout / "results" / "cas", ignore_errors=True)
