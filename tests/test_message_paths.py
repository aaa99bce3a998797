"""Every `workflow_lib/...py` path a message, a schema description or a doc names exists (issue 38:
`stallcase doctor` sent a newcomer to workflow_lib/metric.py, which had moved to plan/metric.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = re.compile(r"workflow_lib/[A-Za-z0-9_/]+\.py")


def _texts():
    yield from (p for p in (ROOT / "workflow_lib").rglob("*.py"))
    yield from (ROOT / "schemas").glob("*.json")
    yield from (ROOT / "config").glob("*.yaml")
    yield from (ROOT / "rules").glob("*.smk")
    yield from (ROOT / "docs").glob("*.md")
    yield ROOT / "Snakefile"
    yield ROOT / "README.md"


def test_every_module_path_named_in_messages_schemas_and_docs_exists():
    named = {(str(f.relative_to(ROOT)), m) for f in _texts() for m in PATH.findall(f.read_text(encoding="utf-8"))}
    assert len(named) > 20  # the scan reads what it should
    missing = sorted(f"{f}: {m}" for f, m in named if not (ROOT / m).is_file())
    assert not missing, missing


def test_doctor_names_only_paths_that_exist(capsys):
    from workflow_lib import cli

    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "workflow_lib/plan/metric.py" in out
    assert all((ROOT / m).is_file() for m in PATH.findall(out)), PATH.findall(out)


def test_reasons_do_not_nest_in_parentheses():
    from workflow_lib.report.text import not_observed_line

    line = not_observed_line({"cupti": {"status": "not_observed", "reason": "not enabled (sources=['host'])"},
                              "host": {"status": "observed", "reason": None},
                              "nvml": {"status": "not_observed", "reason": "no GPU"}})
    assert line == "not observed: cupti: not enabled (sources: host); nvml: no GPU"
    assert "((" not in line and "))" not in line
