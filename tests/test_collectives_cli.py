"""`stallcase collectives INCIDENT_DIR... -o FILE`: summary on stdout, a valid record on disk."""

from __future__ import annotations

import json

from tests.collectives_helpers import make_incident
from tests.fr_builders import MS, job
from workflow_lib import cli
from workflow_lib.records import read_record


def test_cli_writes_a_valid_record_and_names_the_late_rank(tmp_path, capsys):
    j = job(n_ranks=3, n_steps=8, late={4: (2, 25 * MS)})
    j.dumps[1]["entries"][6].update(input_sizes=[[3]], output_sizes=[[3]])
    inc = make_incident(tmp_path, "cli", j.dumps)
    out = tmp_path / "collectives.json"
    rc = cli.main(["collectives", str(inc.path), "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "late: 0|[0, 1, 2] seq 5 all_reduce: rank 2 (gpu_duration)" in text
    assert "mismatch: 0|[0, 1, 2] seq 7 input_sizes: culprit [1]" in text
    assert "transport: not_observed" in text
    rec = read_record(out, "collectives")
    assert rec["summary"]["attributed"] == 1 and rec["summary"]["mismatch"] == 1
    assert json.loads(out.read_text())["kind"] == "collectives"


def test_cli_bad_incident_is_one_line_error(tmp_path, capsys):
    rc = cli.main(["collectives", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "incident directory not found" in err and err.count("\n") == 1


def test_cli_refuses_negative_min_wait(tmp_path, capsys):
    inc = make_incident(tmp_path, "neg", job(n_steps=2).dumps)
    assert cli.main(["collectives", str(inc.path), "--min-wait-ms", "-1"]) == 2
    assert "--min-wait-ms" in capsys.readouterr().err
