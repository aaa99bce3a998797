"""The README's "Your own workload" commands, as written, on a user's own program.

A three-module program in its own git repository (tests/own_workload.py: model, a loader
with worker threads, train.py with the README's loop exactly) is recorded, then the
README's commands run from a stallcase checkout with a real fix as the candidate (four
loader workers instead of one). The verdict must be `faster` by about the change in
iteration time the program itself prints, an A/A must be neither faster nor slower, no run
may fail and every module must be pinned. The same through `stallcase record` (with
`--config experiment=NAME`) and through `stallcase import kineto --workload`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from workflow_lib.core import records

from own_workload import MODULES, make_project
from e2e_design import trials_yaml

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT / "tests" / "fixtures" / "kineto" / "new_rank0.json"
PY = sys.executable
METRIC = "name: iteration_time, source: auto, per: step, statistic: median, skip_steps: 3, unit: ns"
TRIALS = trials_yaml(METRIC)
STEPS = "20"


def _sh(argv, cwd, env, timeout=600):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))}\n{(proc.stdout + proc.stderr)[-5000:]}"
    return proc


def _keep(checkout: Path, incident: str, dest: Path) -> SimpleNamespace:
    """The records of the experiment just run (results/<incident>/ points at the latest)."""
    src = (checkout / "results" / incident).resolve()
    shutil.copytree(src, dest, symlinks=False, ignore=shutil.ignore_patterns("work", "cas"))
    plan = records.read_record(dest / "plan.json", "plan")
    cmp_ = records.read_record(dest / "comparison.json", "comparison")
    runs = [r for p in sorted((dest / "execution").glob("*.json")) for r in records.read_record(p, "execution")["runs"]]
    return SimpleNamespace(plan=plan, comparison=cmp_, runs=runs, dir=dest)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-workload")
    # The user's stallcase checkout after the Quick start: this repository and its .venv.
    checkout = root / "stallcase"
    checkout.mkdir()
    for name in ("Snakefile", "rules", "profiles", "config", "schemas", "workflow_lib", "docs", "examples"):
        (checkout / name).symlink_to(ROOT / name)
    (checkout / ".venv").symlink_to(Path(sys.prefix))
    for tool in ("stallcase", "snakemake"):
        if not (checkout / ".venv" / "bin" / tool).exists():
            pytest.fail(f".venv/bin/{tool} missing: the README's commands need the Quick start's install")
    repo = make_project(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLCASE_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    # What the program itself says about one worker and four (its own clock, not stallcase's).
    per_iter = {}
    for w in ("1", "4"):
        out = _sh([PY, "train.py", "--steps", "60", "--workers", w], repo, env).stdout
        per_iter[w] = float(re.search(r"60 steps in ([\d.]+) s", out).group(1)) / 60
        shutil.rmtree(repo / "incidents")
    # 1. Record it (the README's loop), from the project directory.
    _sh([PY, "train.py", "--steps", STEPS, "--workers", "1"], repo, env)
    # 2. my.yaml as the README writes it, plus a small design.
    mine = textwrap.dedent(f"""
        incidents_dir: {repo / 'incidents'}
        allow_roots: [{repo}]
        candidate:
          set_args: {{"--workers": "4"}}
    """)
    (checkout / "my.yaml").write_text(mine + TRIALS)
    smk = [".venv/bin/snakemake", "--cores", "2", "--profile", "profiles/local", "--configfile", "my.yaml", "--config"]
    # The other entry paths only have to reach the verdict: the same my.yaml without per-run
    # captures (trials.record_runs; the A/B above keeps the default), which halve a run's cost, and
    # three blocks at 75% (the fewest there): the change is over 30%, the floor a few percent.
    (checkout / "paths.yaml").write_text(mine + trials_yaml(METRIC, record_runs=False, blocks=3, confidence=0.75))
    smk_paths = [*smk[:6], "paths.yaml", "--config"]
    _sh([*smk, "incident=slow-step-0412"], checkout, env)
    ab = _keep(checkout, "slow-step-0412", root / "kept" / "ab")
    # The A/A only has to be neither faster nor slower (no floor is asserted on it): the same
    # design without per-run captures, which halve a run's cost.
    (checkout / "aa.yaml").write_text(mine + trials_yaml(METRIC, record_runs=False))
    _sh([*smk[:6], "aa.yaml", "--config", "incident=slow-step-0412", "candidate=baseline"], checkout, env)
    aa = _keep(checkout, "slow-step-0412", root / "kept" / "aa")
    show = _sh([".venv/bin/stallcase", "show", "slow-step-0412"], checkout, env).stdout
    # Or around any program.
    _sh([checkout / ".venv/bin/stallcase", "record", "--outside", "--incident", "rec-0412", "--",
         PY, "train.py", "--steps", STEPS, "--workers", "1"], repo, env)
    _sh([*smk_paths, "incident=rec-0412", "experiment=around-the-program"], checkout, env)
    rec = _keep(checkout, "rec-0412", root / "kept" / "rec")
    # Or a trace you already have, with the command that made it.
    # (the trace the user has lies in their project, the tree my.yaml declares)
    shutil.copy(KINETO, repo / "trace_rank0.json")
    _sh([checkout / ".venv/bin/stallcase", "import", "kineto", repo / "trace_rank0.json", "--incident", "kin-0412", "--workload", "--",
         PY, "train.py", "--steps", STEPS, "--workers", "1"], repo, env)
    _sh([*smk_paths, "incident=kin-0412"], checkout, env)
    kin = _keep(checkout, "kin-0412", root / "kept" / "kin")
    return SimpleNamespace(checkout=checkout, repo=repo, ab=ab, aa=aa, rec=rec, kin=kin, show=show,
                           expected=per_iter["4"] / per_iter["1"])


def _no_failed_runs(exp):
    failed = [(r["index"], r["arm"], r["error"]) for r in exp.runs if r["status"] != "ok"]
    assert not failed, failed[:3]


def _pinned(exp):
    rels = {s["relpath"] for s in exp.plan["arms"]["baseline"]["sources"]}
    assert set(MODULES) <= rels, sorted(rels)
    assert exp.plan["arms"]["candidate"]["sources"] == exp.plan["arms"]["baseline"]["sources"]


def _faster_by_the_iteration_change(exp, expected):
    c = exp.comparison
    assert c["verdict"] == "faster", c["reasons"]
    ratio = c["estimate"]["ratio"]
    # The size: iteration time, as the program's own clock sees it (body-only steps would
    # give about 1.0 here: the model's time does not change).
    assert expected < 0.7, expected
    assert 0.6 * expected <= ratio <= expected / 0.6, (ratio, expected)
    assert {r["metric_source"] for r in exp.runs} == {"recorder_steps"}


@pytest.mark.slow
def test_readme_workload_faster_by_the_iteration_change(world):
    _faster_by_the_iteration_change(world.ab, world.expected)
    assert world.ab.plan["arms"]["candidate"]["argv"][-2:] == ["--workers", "4"]


@pytest.mark.slow
def test_readme_workload_no_failed_runs_and_every_module_pinned(world):
    for exp in (world.ab, world.aa):
        _no_failed_runs(exp)
        _pinned(exp)


@pytest.mark.slow
def test_readme_workload_aa_is_neither_faster_nor_slower(world):
    assert world.aa.comparison["aa_experiment"] is True
    assert world.aa.comparison["verdict"] not in ("faster", "slower"), world.aa.comparison["reasons"]


@pytest.mark.slow
def test_readme_show_and_report(world):
    assert "slow-step-0412" in world.show
    assert (world.ab.dir / "report.html").stat().st_size > 1000


@pytest.mark.slow
def test_record_path_reaches_the_same_verdict(world):
    _no_failed_runs(world.rec)
    _pinned(world.rec)
    _faster_by_the_iteration_change(world.rec, world.expected)
    assert world.rec.plan["experiment"] == "around-the-program"


@pytest.mark.slow
def test_kineto_import_path_reaches_the_same_verdict(world):
    _no_failed_runs(world.kin)
    _pinned(world.kin)
    _faster_by_the_iteration_change(world.kin, world.expected)
