"""A user's config stands alone: their `candidate:` replaces the demo's, nothing merges in."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from workflow_lib.plan import build as P
from workflow_lib.core import records

from program_factory import make_program, record

ROOT = Path(__file__).resolve().parent.parent


def _defaults() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_demo_candidate_applies_only_to_the_demo():
    cfg = _defaults()
    assert "candidate" not in cfg  # a top-level one would merge into every user's config file
    assert P.configured_candidate(dict(cfg, incident="demo")) == cfg["demo"]["candidate"]
    assert P.configured_candidate(dict(cfg, incident="tx")) is None
    assert P.configured_candidate(dict(cfg, incident="demo", candidate="baseline")) == "baseline"
    mine = {"set_args": {"--workers": "4"}}
    assert P.configured_candidate(dict(cfg, incident="tx", candidate=mine)) == mine


@pytest.mark.slow
def test_readme_configfile_candidate_reaches_the_plan_alone(tmp_path):
    """`snakemake --cores 2 --profile profiles/local --configfile my.yaml --config incident=tx`, as the README says."""
    repo = make_program(tmp_path)
    record(repo, tmp_path / "incidents", "--steps", "3", incident="tx")
    my = tmp_path / "my.yaml"
    my.write_text(textwrap.dedent("""\
        candidate:
          set_args: {"--steps": "5"}
        """))
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--profile", "profiles/local",
                        "--configfile", str(my), "--config", "incident=tx", f"incidents_dir={tmp_path / 'incidents'}",
                        f"results_dir={tmp_path / 'results'}", "--until", "plan"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    plan = records.read_record(next((tmp_path / "results").rglob("plan.json")), "plan")
    cand = plan["arms"]["candidate"]
    assert cand["changes"] == {"set_args": {"--steps": "5"}}
    assert cand["argv"][-2:] == ["--steps", "5"] and "--min-ready" not in cand["argv"] and "--sync-every" not in cand["argv"]
    assert cand["argv"][:-1] == plan["arms"]["baseline"]["argv"][:-1]


@pytest.mark.slow
def test_a_user_incident_without_a_candidate_is_refused_at_the_plan(tmp_path):
    repo = make_program(tmp_path)
    record(repo, tmp_path / "incidents", incident="tx")
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--config", "incident=tx",
                        f"incidents_dir={tmp_path / 'incidents'}", f"results_dir={tmp_path / 'results'}", "--until", "plan"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "no candidate for incident tx" in r.stdout + r.stderr
