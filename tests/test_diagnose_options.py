"""Wait spans by name segment; the `diagnose:` config key (schema + options); the CLI
importing and diagnosing a trace file in one process."""

import json

import pytest
import yaml
from jsonschema import Draft202012Validator

from workflow_lib.core import records
from workflow_lib.cli import main
from workflow_lib.diagnose import DiagnoseOptions
from workflow_lib.core.errors import InputError


@pytest.mark.parametrize("name,is_wait", [
    ("queue.wait", True), ("load_batch", True), ("DataLoader.next", True), ("data_wait", True),
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", True),
    ("_MultiProcessingDataLoaderIter._next_data", True),
    ("enqueue_work", False), ("batchnorm", False), ("requeued", False), ("compute", False),
])
def test_default_wait_patterns_match_by_segment(name, is_wait):
    assert bool(DiagnoseOptions().wait_regex().search(name)) is is_wait


def test_config_key_is_in_schema_and_builds_options():
    cfg = yaml.safe_load(open("config/config.yaml"))
    cfg["diagnose"] = {"step_pattern": r"train_step_(\d+)", "wait_patterns": ["fetch"], "warmup_steps": 1}
    schema = records.load_schema("config")
    Draft202012Validator(schema).validate(cfg)
    opts = DiagnoseOptions.from_config(cfg["diagnose"])
    assert opts.step_pattern == r"train_step_(\d+)" and opts.wait_patterns == ("fetch",) and opts.warmup_steps == 1
    bad = dict(cfg, diagnose={"wait_pattern": ["x"]})
    assert list(Draft202012Validator(schema).iter_errors(bad))
    with pytest.raises(InputError, match="config diagnose.step_pattern"):
        DiagnoseOptions.from_config({"step_pattern": "no_group"})


def test_first_call_thresholds_are_config_keys_checked_like_warmup_steps():
    cfg = yaml.safe_load(open("config/config.yaml"))
    cfg["diagnose"] = {"first_call_factor": 20, "first_call_over_longest": 3.5, "first_call_min_later": 5,
                       "first_call_min_ns": 250_000}
    Draft202012Validator(records.load_schema("config")).validate(cfg)
    opts = DiagnoseOptions.from_config(cfg["diagnose"])
    assert (opts.first_call_factor, opts.first_call_over_longest, opts.first_call_min_later, opts.first_call_min_ns) == (20, 3.5, 5, 250_000)
    assert opts.as_record()["first_call_min_ns"] == 250_000 and DiagnoseOptions.from_config({}).first_call_factor == 10.0
    for key, value in (("first_call_factor", 1), ("first_call_factor", float("nan")), ("first_call_over_longest", 0.5),
                       ("first_call_min_later", 0), ("first_call_min_later", 2.5), ("first_call_min_ns", -1)):
        with pytest.raises(Exception, match=f"config diagnose.{key}"):
            DiagnoseOptions.from_config({key: value})


def test_rule_passes_the_config_section():
    text = open("rules/diagnose.smk").read()
    assert 'settings=config.get("diagnose")' in text


def test_cli_diagnoses_a_trace_file_in_one_process(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["diagnose", "tests/fixtures/kineto/new_rank1.json.gz", "-o", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["summary"]["steps"] == 8 and rec["schema_version"] == 4 and rec["step_tables"]["steps"]["rows"] == 8
    assert "slow steps" in capsys.readouterr().out
    assert not list(tmp_path.glob("stallcase-diagnose-*"))
