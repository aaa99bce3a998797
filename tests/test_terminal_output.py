"""What the terminal says: the end of a run, a config typo, a missing incident, a failed stage,
`stallcase show` from a subdirectory, `stallcase doctor`. Real Snakemake runs, kept fast (-n,
or a run that fails at its first stage); the end-of-run line is read from the demo run the
suite already makes (tests/conftest.py's demo_pipeline).
"""

from __future__ import annotations

import os
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import report_cases as RC
from workflow_lib.compare.types import Comparison
from workflow_lib.core import typed
from workflow_lib import cli
from workflow_lib.core import records
from workflow_lib.report import glance, terminal

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def smk(workdir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
                           "--cores", "1", "--configfile", str(ROOT / "config" / "config.yaml"), *args],
                          cwd=workdir, capture_output=True, text=True, timeout=timeout, check=False, env=ENV)


def _stallcase_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith(("error:", "stallcase:"))]


def test_config_typo_prints_the_one_key_and_what_it_accepts(tmp_path):
    r = smk(tmp_path, "-n", "--config", "trails={blocks: 3}")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    keys = ", ".join(json.loads((ROOT / "schemas" / "config.schema.json").read_text(encoding="utf-8"))["properties"])
    assert _stallcase_lines(out) == ["error: config: unknown key 'trails' at the top level: did you mean 'trials'? accepted keys: "
                                     f"{keys}; `stallcase doctor` lists every key"]
    assert len(out.splitlines()) <= 3, out  # not the schema (Snakemake's validate printed ~420 lines)
    assert "$schema" not in out and "additionalProperties" not in out


def test_config_wrong_type_names_the_nested_key(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("trials:\n  blocks: many\n", encoding="utf-8")  # merged over config/config.yaml, as Snakemake does
    r = smk(tmp_path, "-n", "--configfile", str(ROOT / "config" / "config.yaml"), str(mine))
    lines = _stallcase_lines(r.stdout + r.stderr)
    assert r.returncode != 0 and len(lines) == 1, r.stdout + r.stderr
    assert lines[0].startswith("error: config: key 'trials.blocks' is \"many\": accepts integer (>= "), lines[0]


def test_missing_incident_is_one_line_with_where_and_how(tmp_path):
    (tmp_path / "incidents" / "other").mkdir(parents=True)
    shutil.copy(RC.FIXTURES / "capture" / "host-gap" / "manifest.json", tmp_path / "incidents" / "other" / "manifest.json")
    r = smk(tmp_path, "-n", "--config", "incident=nosuch")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "MissingInputException" not in out and "Traceback" not in out
    (line,) = _stallcase_lines(out)
    assert line.startswith(f"error: {tmp_path / 'incidents' / 'nosuch' / 'manifest.json'}: no incident 'nosuch'")
    assert "incidents_dir 'incidents'; it holds: other" in line
    assert "stallcase record --incident nosuch -- " in line and "--config incident=demo" in line


def test_failed_stage_prints_its_error_and_the_fix(tmp_path):
    bad = tmp_path / "incidents" / "bad"
    bad.mkdir(parents=True)
    (bad / "manifest.json").write_text('{"incident_id": "bad"}', encoding="utf-8")
    r = smk(tmp_path, "--config", "incident=bad")  # fails at its first stage, snapshot
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-2000:]
    lines = _stallcase_lines(out)
    assert lines[0] == "stallcase: error: incidents/bad/manifest.json: violates incident_manifest schema at (root): " \
                       "'schema_version' is a required property", out[-3000:]
    assert lines[1].startswith("stallcase: fix: the file does not match its schema") and "results/bad/logs/snapshot.log" in lines[1]


@pytest.mark.slow
def test_end_of_run_prints_the_verdict_and_the_report(demo_pipeline):
    comp = typed.read(demo_pipeline.demo / "comparison.json", Comparison)
    lines = _stallcase_lines(demo_pipeline.output)
    # The comparison's warnings follow the verdict on its line (a busy machine's, when the suite's
    # other worker loaded the machine during the demo's runs).
    assert lines == [f"stallcase: {glance.verdict_line(comp, 'demo')}",
                     f"stallcase: report: {(demo_pipeline.demo / 'report.html').resolve()}  (or: stallcase show demo)"]
    assert lines[0].startswith(f"stallcase: demo: {glance.verdict_text(glance.verdict(comp))}")
    assert "[" in lines[0] and "noise floor ±" in lines[0]


def test_success_lines_from_records(tmp_path):
    p = RC.h200_pipeline_records("demo-ab", tmp_path / "results")
    if p is None:
        pytest.skip("H200 fixture tests/fixtures/h200/demo-ab not present")
    (p["snapshot"].parent / "report.html").write_text("x", encoding="utf-8")
    first, second = terminal.success_lines(tmp_path / "results", "demo")
    assert first == "stallcase: demo: Faster: step time −75.0% [−75.0%, −74.9%] (95% interval), noise floor ±0.869%, 6 of 6 blocks"
    assert second.startswith("stallcase: report: ") and second.endswith("report.html  (or: stallcase show demo)")
    assert terminal.success_lines(tmp_path / "results", "absent") == ["stallcase: absent: no comparison yet (comparison.json absent)"]


def test_show_finds_results_from_a_subdirectory(tmp_path, monkeypatch, capsys):
    p = RC.h200_pipeline_records("demo-ab", tmp_path / "results")
    if p is None:
        pytest.skip("H200 fixture tests/fixtures/h200/demo-ab not present")
    deep = tmp_path / "src" / "model"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert cli.main(["show", "demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("incident demo ")
    assert "verdict: Faster: step time −75.0%" in out
    assert "sources=[" not in out and "explained 0 ns" not in out
    # nowhere to be found: the error says exactly where it looked
    monkeypatch.chdir(tmp_path.parent)
    assert cli.main(["show", "demo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: results/demo/snapshot.json: no snapshot for incident 'demo': looked for results/demo/snapshot.json in "
                   f"{tmp_path.parent.resolve()} and each parent up to /; run the workflow from the project directory "
                   "(snakemake --config incident=demo) or pass --results-dir")


def test_doctor_lists_every_key_and_checks_a_config(tmp_path, capsys):
    assert cli.main(["doctor"]) == 0
    listing = capsys.readouterr().out
    for key in ("incident:", "trials.blocks:", "trials.metric.name:", "candidate.set_args:", "demo.args:"):
        assert f"\n  {key}" in listing, key
    assert cli.main(["doctor", str(ROOT / "config" / "config.yaml")]) == 0
    assert capsys.readouterr().out.startswith("ok: ")
    typo = tmp_path / "typo.yaml"
    typo.write_text((ROOT / "config" / "config.yaml").read_text(encoding="utf-8").replace("runs_per_arm:", "runs_per_armm:"),
                    encoding="utf-8")
    assert cli.main(["doctor", str(ROOT / "config" / "config.yaml"), str(typo)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown key 'trials.runs_per_armm' in trials: did you mean 'runs_per_arm'?" in err


def test_blocked_preflight_is_the_error_with_the_experiment_fix(tmp_path):
    from benchmarks import compare_builders as CB

    plan = CB.plan(CB.design(blocks=2, runs_per_arm=1, control_runs=1, warmup_runs=0))
    rec = RC._preflight(plan, records.digest_of(plan), "b000",
                        differences=[{"field": "driver_version", "planned": "580.1", "observed": "580.2"}])
    rec["status"] = "blocked"
    log = tmp_path / plan["incident_id"] / "logs" / "preflight-b000.json"
    records.write_record(log, rec, "preflight")
    err, fix = terminal.error_lines(tmp_path, plan["incident_id"])
    assert err.startswith("stallcase: error: preflight b000: blocked on node-0 |") and "driver_version: planned '580.1', observed '580.2'" in err
    assert fix.startswith("stallcase: fix: to run the trials in the changed environment anyway, name it as a new experiment: "
                          "--config experiment=NAME") and str(log) in fix


def test_a_rule_without_an_error_line_is_named_with_its_log(tmp_path):
    smk_log = tmp_path / "run.snakemake.log"
    smk_log.write_text("Select jobs to execute...\n[Tue Dec  1 08:25:33 2026]\nError in rule trials:\n    message: None\n"
                       "    jobid: 9\n    log: results/x/logs/trials-b003.log (check log file(s) for error details)\n", encoding="utf-8")
    assert terminal.error_lines(tmp_path / "results", "x", str(smk_log)) == [
        "stallcase: error: rule trials failed without a stallcase error line; its log: results/x/logs/trials-b003.log; "
        "Snakemake's message is above"]
