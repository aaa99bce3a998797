"""`stallcase collectives INCIDENT_DIR... -o FILE`: summary on stdout, a valid record on disk."""

from __future__ import annotations

import json

from tests.collectives_helpers import make_incident
from benchmarks.fr_builders import MS, hang_job, job
from workflow_lib import cli
from workflow_lib.core.records import read_record


def test_cli_writes_a_valid_record_and_names_the_late_rank(tmp_path, capsys):
    j = job(n_ranks=3, n_steps=8, late={4: (2, 25 * MS)})
    j.dumps[1]["entries"][6].update(input_sizes=[[3]], output_sizes=[[3]])
    inc = make_incident(tmp_path, "cli", j.dumps)
    out = tmp_path / "collectives.json"
    rc = cli.main(["collectives", str(inc.path), "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "hung on: nothing" in text.splitlines()[0]
    assert "late: rank 2 at 0|[0, 1, 2] seq 5 all_reduce" in text
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


def test_cli_prints_the_hung_collective_first(tmp_path, capsys):
    h = hang_job(16, "gil", 9)
    inc = make_incident(tmp_path, "hang", h.dumps)
    assert cli.main(["collectives", str(inc.path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("hung on: 0|[") and lines[0].endswith(f"seq {h.hang_seq} all_reduce: rank 9 (never_joined)")
    assert lines[1].startswith("  never_joined: rank 9 at ")
    assert any(line.startswith("clocks: 16 domains") for line in lines)


def test_cli_reads_a_version_1_record(tmp_path, capsys):
    from workflow_lib.report.text import collectives_summary_lines as summary_lines

    inc = make_incident(tmp_path, "v1", job(n_steps=2).dumps)
    from tests.collectives_helpers import analyze

    rec = analyze([inc])
    old = {k: v for k, v in rec.items() if k not in ("culprits", "hung_on")}
    old["schema_version"] = 1
    for op in old["ops"]:
        for k in ("progress", "states", "counter_ranks"):
            op.pop(k)
    from workflow_lib.core import records

    records.validate(old, "collectives")
    assert summary_lines(old)[0] == "hung on: not available (a version-1 record)"
