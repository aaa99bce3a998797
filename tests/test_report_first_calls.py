"""One-time first calls (checks/first_call.py) on the first screen and in `stallcase diagnose`:
said once, after the ranked experiments (first_call is never ranked), with the number the
summary holds; nothing said where the check attributed nothing. On HTA's AlexNet trace (one
step: its first aten::to and conv2d are CUDA and cuDNN setup, 41.6 s of 43.4 s) and on the
cold-loader incident of issue 25 (a warm-up step, no first call after it)."""

from pathlib import Path

import report_cases as RC
from workflow_lib.cli import main
from workflow_lib.diagnose import load_diagnosis
from workflow_lib.report import glance, html_glance

ALEXNET = Path(__file__).parent / "fixtures" / "real_traces" / "hta_critical_path_alexnet_trace.json.gz"


def _diagnose(src: Path, out: Path, capsys) -> tuple[list[str], object]:
    assert main(["diagnose", str(src), "-o", str(out)]) == 0
    return capsys.readouterr().out.splitlines(), load_diagnosis(out)


def test_first_calls_are_said_once_after_the_ranked_experiments(tmp_path, capsys):
    lines, diag = _diagnose(ALEXNET, tmp_path / "diagnosis.json", capsys)
    b = diag.summary.by_check["first_call"]
    assert b["attributed_steps"] == 1 and b["explains_ns"] > 0.9 * diag.summary.wall_ns
    said = [i for i, ln in enumerate(lines) if ln.startswith("one-time first calls: ")]
    ranked = [i for i, ln in enumerate(lines) if ln.startswith("  1. ")]
    assert len(said) == 1 and ranked and ranked[0] < said[0]
    assert lines[said[0]].startswith(f"one-time first calls: {b['explains_ns'] / 1e6:.3f} ms in 1 step(s)")
    assert "not ranked" in lines[said[0]]
    assert all(not ln.startswith("  ") or "first_call" not in ln for ln in lines)  # never a ranked experiment
    f = glance.first_calls(diag)
    assert f["explains"].value == b["explains_ns"] and f["explains"].src.endswith("/by_check/first_call/explains_ns")
    html = html_glance._first_calls(f)
    assert html.count('id="glance-first-calls"') == 1 and "not ranked" in html


def test_nothing_is_said_where_no_first_call_was_attributed(tmp_path, capsys):
    inc = RC.cold_loader_incident(tmp_path / "incidents" / "cold-loader")
    lines, diag = _diagnose(inc, tmp_path / "diagnosis.json", capsys)
    assert diag.summary.by_check["first_call"]["attributed_steps"] == 0
    assert not any(ln.startswith("one-time first calls") for ln in lines)
    assert glance.first_calls(diag) is None and html_glance._first_calls(None) == ""
