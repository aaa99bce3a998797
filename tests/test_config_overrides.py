"""`--config` overrides typed by the schema, and a user's own config file checked over the
workflow's defaults, the same way in the Snakefile, `stallcase doctor` and `check-config` (issue 38).
The real Snakemake run is in tests/test_hardening_e2e.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib import cli
from workflow_lib.core import config
from workflow_lib.core.errors import StallcaseError


def test_nested_override_values_are_converted_by_the_declared_types():
    got = config.load([], ["trials={blocks: 8, record_runs: false, confidence: 0.9, metric: {skip_steps: 2, ranks: [0, 1]}}",
                           "experiment=null"])
    t = got["trials"]
    assert t["blocks"] == 8 and t["record_runs"] is False and t["confidence"] == 0.9
    assert t["metric"]["skip_steps"] == 2 and t["metric"]["ranks"] == [0, 1]
    assert got["experiment"] == "null"  # a string is accepted there: left as Snakemake gave it
    config.check(got)


@pytest.mark.parametrize("item, key, value", [
    ("trials={blocks: x}", "trials.blocks", "'x'"),
    ("trials={record_runs: maybe}", "trials.record_runs", "'maybe'"),
    ("trials={metric: {ranks: [0, one]}}", "trials.metric.ranks.1", "'one'"),
])
def test_an_override_that_does_not_convert_is_refused_naming_key_and_value(item, key, value):
    with pytest.raises(StallcaseError) as got:
        config.load([], [item])
    assert key in got.value.oneline() and value in got.value.oneline()


def test_doctor_and_check_config_read_a_users_own_file_over_the_defaults(tmp_path, capsys):
    mine = tmp_path / "my.yaml"
    mine.write_text("incident: demo\ntrials:\n  blocks: 8\n", encoding="utf-8")
    assert cli.main(["doctor", str(mine)]) == 0, capsys.readouterr().err
    assert cli.main(["check-config", str(mine)]) == 0, capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("trials:\n  blocks: 2\n", encoding="utf-8")  # below the fewest blocks at the default confidence
    assert cli.main(["doctor", str(bad)]) == 2
    assert "trials.blocks" in capsys.readouterr().err


def test_check_config_without_overrides_does_not_import_snakemake():
    """Snakemake's import pulls in its SLURM plugin, which asks `scontrol show config` at import:
    10 s per command where a SLURM client has no controller (the corpus' 33 config entries took
    5 minutes). Only `--config` items need its parser."""
    code = ("import sys; from workflow_lib.cli import main; rc = main(['check-config', 'config/config.yaml']); "
            "print(rc, 'snakemake' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr
