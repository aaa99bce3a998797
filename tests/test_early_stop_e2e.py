"""`trials: {stop: early}` through the workflow on the built-in demo (real Snakemake, the local
profile): the A/B (four producers, no per-step sync) is `faster` before the block limit, with
the looks it took on disk and the end line saying where it stopped; the deliberate A/A
(candidate = baseline) is neither faster nor slower, whatever look it stopped at.

Sized for CI: a limit of 8 blocks (looks at 6 and 8: plan/stopping.py) and the demo's 12 steps a
run (tests/conftest.py's DEMO_SMALL), so the A/B can stop at its first look, 2 blocks early."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from workflow_lib.core import records

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 8
TRIALS = (f"trials:\n  blocks: {LIMIT}\n  runs_per_arm: 1\n  control_runs: 1\n  warmup_runs: 0\n  stop: early\n"
          "  record_runs: false\n"
          'demo:\n  args: ["--steps", "12", "--min-ready", "4", "--sync-every", "1"]\n')


def _run(cfg: Path, cwd: Path, env: dict, *extra: str) -> str:
    proc = subprocess.run([str(Path(sys.prefix) / "bin" / "snakemake"), "--cores", "2", "--profile", "profiles/local",
                           "--configfile", str(cfg), "--config", "incident=demo", *extra],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=1500, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return proc.stdout + proc.stderr


def _latest(results: Path) -> SimpleNamespace:
    d = (results / "demo" / "latest").resolve()
    return SimpleNamespace(dir=d, comparison=records.read_record(d / "comparison.json", "comparison"),
                           plan=records.read_record(d / "plan.json", "plan"),
                           looks=[records.read_record(p, "look") for p in sorted((d / "looks").glob("w*.json"))])


@pytest.fixture(scope="module")
def demo_pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("early")
    cfg = root / "early.yaml"
    cfg.write_text(f"results_dir: {root / 'results'}\nincidents_dir: {root / 'incidents'}\n" + TRIALS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLCASE_")}
    env.update(OMP_NUM_THREADS="1")
    ab_end = _run(cfg, ROOT, env)
    ab = _latest(root / "results")
    aa_end = _run(cfg, ROOT, env, "candidate=baseline")
    aa = _latest(root / "results")
    return SimpleNamespace(ab=ab, aa=aa, ab_end=ab_end, aa_end=aa_end)


@pytest.mark.slow
def test_the_fix_is_faster_before_the_block_limit(demo_pipeline):
    c = demo_pipeline.ab.comparison
    seq = c["sequential"]
    assert c["verdict"] == "faster", c["reasons"]
    assert seq["why"] == "clears_floor" and seq["blocks_run"] < LIMIT, seq
    assert len(list((demo_pipeline.ab.dir / "execution").glob("*.json"))) == seq["blocks_run"]
    looks = demo_pipeline.ab.looks
    assert [lk["stop"] for lk in looks] == [False] * (len(looks) - 1) + [True]
    assert looks[-1]["blocks"] == seq["blocks_run"] and looks[-1]["verdict"] == "faster"
    assert f"(stop: early, look {seq['look']} of {seq['looks_planned']}, limit {LIMIT})" in demo_pipeline.ab_end


@pytest.mark.slow
def test_the_aa_is_neither_faster_nor_slower_and_says_where_it_stopped(demo_pipeline):
    c = demo_pipeline.aa.comparison
    assert c["aa_experiment"] and c["verdict"] not in ("faster", "slower"), c["reasons"]
    seq = c["sequential"]
    assert seq["why"] in ("rules_out_min_effect", "block_limit")
    assert c["reasons"][0].startswith("sequential design (stop: early)")
    plan_looks = demo_pipeline.aa.plan["design"]["stop"]["looks"]
    assert sum(lk["alpha"] for lk in plan_looks) <= 0.05 + 1e-9
