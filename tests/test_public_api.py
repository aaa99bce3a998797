"""`import stallcase`: the public API (the recorder, the importers' entry points, load_diagnosis,
the record types) under the distribution's own name, from the editable install of README's
Quick start (tests/test_plain_install.py checks a normal install). workflow_lib stays the
implementation, and its names keep working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PUBLIC = ["FlightRecorder", "Budget", "LatencyTrigger", "import_kineto", "import_torch_fr", "import_nsys", "load_diagnosis",
          "Diagnosis", "read_record", "IncidentManifest", "Latest", "StepsOut", "Snapshot", "CollectivesRecord",
          "DiagnosisRecord", "Plan", "Preflight", "Execution", "Comparison"]


def _probe(code: str, tmp_path) -> str:
    """Run `code` in a fresh interpreter of this environment, outside the checkout and without
    PYTHONPATH, so only the installed package can answer `import stallcase`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_import_stallcase_names_the_public_api(tmp_path):
    out = json.loads(_probe(
        "import json, stallcase, workflow_lib.capture as cap, workflow_lib.compare.types as ct, "
        "workflow_lib.diagnose.stored as ds;"
        "print(json.dumps({'all': stallcase.__all__, 'file': stallcase.__file__,"
        " 'same': [stallcase.FlightRecorder is cap.FlightRecorder, stallcase.Comparison is ct.Comparison,"
        "          stallcase.load_diagnosis is ds.load_diagnosis],"
        " 'callable': [callable(getattr(stallcase, n)) for n in stallcase.__all__ if n != '__version__']}))", tmp_path))
    assert sorted(out["all"]) == sorted(["__version__", *PUBLIC])
    assert Path(out["file"]).resolve() == REPO / "workflow_lib" / "public" / "__init__.py"  # the editable install
    assert out["same"] == [True, True, True] and all(out["callable"])


def test_recording_through_import_stallcase_writes_an_incident(tmp_path):
    """README's "Your own workload" loop, as written there, with `from stallcase import FlightRecorder`."""
    _probe("from stallcase import FlightRecorder\n"
           "rec = FlightRecorder(incident_id='public-api-0')\n"
           "with rec:\n"
           "    for i in range(5):\n"
           "        with rec.step(i):\n"
           "            with rec.span('forward'):\n"
           "                sum(range(1000))\n"
           "    rec.snapshot('workload_boundary')\n", tmp_path)
    manifest = json.loads((tmp_path / "incidents" / "public-api-0" / "manifest.json").read_text())
    assert manifest["incident_id"] == "public-api-0"


def test_an_unknown_name_is_an_attribute_error(tmp_path):
    out = _probe("import stallcase\ntry:\n    stallcase.NoSuchThing\nexcept AttributeError as e:\n    print(e)", tmp_path)
    assert "has no attribute 'NoSuchThing'" in out


def test_the_readme_shows_import_stallcase():
    readme = (REPO / "README.md").read_text()
    own = readme.split("## Your own workload", 1)[1].split("\n## ", 1)[0]
    assert "from stallcase import FlightRecorder" in own and "workflow_lib" not in own.split("```python", 1)[1].split("```", 1)[0]
