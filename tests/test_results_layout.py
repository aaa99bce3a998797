"""Results per experiment: an A/A, an A/B and a named experiment on one incident never
overwrite each other, and results/<incident>/ shows the latest (workflow_lib/core/layout.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.core import layout, records

from program_factory import make_program, record

ROOT = Path(__file__).resolve().parent.parent
SMALL = """\
trials:
  blocks: 1
  runs_per_arm: 1
  control_runs: 1
  warmup_runs: 1
  seed: 3
  max_retries: 0
  max_failed_fraction: 0.34
  confidence: 0.95
  run_timeout_s: 60
  metric: {name: step_time, source: recorder_steps, statistic: median, skip_steps: 0, unit: ns}
candidate:
  set_args: {"--steps": "5"}
"""


def test_run_keys_differ_by_what_is_planned(tmp_path):
    design = {"blocks": 1}
    ab = layout.run_key({"set_args": {"--k": "1"}}, design, None)
    assert re.fullmatch(layout.RUN_KEY_PATTERN, ab) and ab.startswith("ab-")
    assert layout.run_key("baseline", design, None).startswith("aa-")
    assert layout.run_key({"set_args": {"--k": "1"}}, design, "e1").startswith("exp-")
    assert layout.run_key({"set_args": {"--k": "2"}}, design, None) != ab
    assert layout.run_key({"set_args": {"--k": "1"}}, {"blocks": 2}, None) != ab
    patch = tmp_path / "p.patch"
    patch.write_text("one")
    k1 = layout.run_key({"patch": str(patch)}, design, None)
    patch.write_text("two")  # same name, other bytes: another plan
    assert layout.run_key({"patch": str(patch)}, design, None) != k1


def test_point_latest_leaves_an_older_layouts_file_alone(tmp_path):
    inc = tmp_path / "r" / "x"
    (inc / "runs" / "ab-000000000000").mkdir(parents=True)
    (inc / "plan.json").write_text("{}")  # written by an older version, not a link
    notes = layout.point_latest(str(tmp_path / "r"), "x", "ab-000000000000", "0" * 64)
    assert (inc / "plan.json").read_text() == "{}" and len(notes) == 1 and "older results layout" in notes[0]
    assert os.readlink(inc / "latest") == "runs/ab-000000000000"
    assert os.readlink(inc / "report.html") == "latest/report.html"
    rec = records.read_record(inc / "latest.json", "latest")
    assert rec["run"] == "ab-000000000000"


def _smk(tmp_path, *extra):
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--profile", "profiles/local",
                        "--configfile", str(tmp_path / "my.yaml"), "--config", "incident=tx",
                        f"incidents_dir={tmp_path / 'incidents'}", f"results_dir={tmp_path / 'results'}", *extra],
                       cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def _bytes(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*.json")) if "work" not in p.parts}


@pytest.mark.slow
def test_aa_ab_and_named_experiment_keep_their_own_results(tmp_path):
    repo = make_program(tmp_path)
    record(repo, tmp_path / "incidents", "--steps", "3", incident="tx")
    (tmp_path / "my.yaml").write_text(SMALL)
    inc = tmp_path / "results" / "tx"
    runs = {}
    for name, extra in (("ab", ()), ("aa", ("candidate=baseline",)), ("exp", ("experiment=e1",))):
        _smk(tmp_path, *extra)
        latest = records.read_record(inc / "latest.json", "latest")
        assert latest["run"].startswith(name + "-")
        runs[name] = inc / latest["run_dir"]
        assert (inc / "comparison.json").resolve() == (runs[name] / "comparison.json").resolve()
        assert (inc / "report.html").resolve() == (runs[name] / "report.html").resolve()
    assert len({p.name for p in runs.values()}) == 3
    kept = {n: _bytes(d) for n, d in runs.items()}
    plans = {n: records.read_record(d / "plan.json", "plan") for n, d in runs.items()}
    assert plans["aa"]["arms"]["candidate"]["same_as_baseline"] and not plans["ab"]["arms"]["candidate"]["same_as_baseline"]
    assert plans["exp"]["experiment"] == "e1" and plans["ab"]["experiment"] is None
    for n, d in runs.items():
        cmp_ = records.read_record(d / "comparison.json", "comparison")
        assert cmp_["plan_digest"] == records.digest_of(plans[n])
    # Back to the A/B: nothing is re-run, results/<incident>/ points at it again, nothing was overwritten.
    _smk(tmp_path)
    assert records.read_record(inc / "latest.json", "latest")["run"] == runs["ab"].name
    assert json.loads((inc / "plan.json").read_text())["experiment"] is None
    assert {n: _bytes(d) for n, d in runs.items()} == kept
