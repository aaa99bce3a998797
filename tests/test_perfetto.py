"""Perfetto/Chrome trace export: valid JSON with the expected tracks, findings as annotations; CLI."""

import json
from pathlib import Path

from tests.builders import api, kernel, make_incident, memcpy, nvml, span, step
from workflow_lib.cli import main
from workflow_lib.diagnose import DiagnoseOptions, diagnose
from workflow_lib.report.perfetto import export_perfetto

FIX = Path(__file__).parent / "fixtures" / "kineto"


def _inc():
    return make_incident(steps=[step(0, 1000, 11_000_000)], kernels=[kernel(1000, 2_000_000, stream=7), kernel(5_000_000, 6_000_000, stream=13)],
                         memcpy=[memcpy(2_000_000, 2_100_000)], runtime_api=[api(1000, 5000)], spans=[span("data_wait", 2_100_000, 5_000_000)],
                         nvml=[nvml(3_000_000, "sm_clock_mhz", 1980)])


def test_export_tracks_and_findings(tmp_path):
    inc = _inc()
    diag = diagnose(inc, incident_id="t", snapshot_digest="0" * 64, options=DiagnoseOptions())
    out = tmp_path / "trace.json"
    export_perfetto(inc, diag, out)
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert {e["tid"] for e in kernels} == {7, 13}
    assert kernels[0]["ts"] == 0.0 and kernels[0]["dur"] == 1999.0
    assert any(e.get("cat") == "step" and e["name"] == "step 0" for e in ev)
    assert any(e.get("cat") == "span" and e["name"] == "data_wait" for e in ev)
    assert any(e["ph"] == "C" and e["name"] == "sm_clock_mhz" and e["args"]["value"] == 1980 for e in ev)
    findings = [e for e in ev if e.get("cat") == "finding"]
    assert any(e["name"].startswith("input_starvation: attributed") for e in findings)
    names = {e["args"]["name"] for e in ev if e["ph"] == "M"}
    assert {"rank 0 host", "rank 0 GPU 0", "rank 0 diagnosis", "sync_stall"} <= names


def test_cli_import_diagnose_export(tmp_path, capsys):
    incs = tmp_path / "incidents"
    assert main(["import", "kineto", str(FIX / "new_rank0.json"), "--incident", "k", "--incidents-dir", str(incs)]) == 0
    assert main(["diagnose", str(incs / "k"), "-o", str(tmp_path / "d.json"), "--wait-span", "DataLoader"]) == 0
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["options"]["wait_patterns"] == ["DataLoader"]
    assert main(["export", str(incs / "k"), "-o", str(tmp_path / "t.json"), "--diagnosis", str(tmp_path / "d.json")]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert main(["diagnose", str(tmp_path / "missing")]) == 2
    assert main(["diagnose", str(incs / "k"), "--wait-span", "("]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "--wait-span" in err
