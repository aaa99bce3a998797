"""Temporal breakdown agrees with Holistic Trace Analysis (idle / compute / non-compute).

The HTA comparison runs HTA itself when its venv exists (HTA_PYTHON, default
/work/venvs/hta/bin/python); its CPU twin checks the same numbers against values computed by
hand from the fixture's construction.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from workflow_lib.diagnose.breakdown import temporal_breakdown
from workflow_lib.importers.kineto import import_kineto
from workflow_lib.core.incident import read_incident

FIX = Path(__file__).parent / "fixtures" / "kineto"
HTA_PYTHON = os.environ.get("HTA_PYTHON", "/work/venvs/hta/bin/python")
US = 1000


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    inc = import_kineto([FIX / "new_rank0.json"], incident_id="hta", incidents_dir=tmp_path_factory.mktemp("inc"))
    return read_incident(inc)


def test_breakdown_by_hand(ours):
    (b,) = temporal_breakdown(ours)
    # HTA's population: the last ProfilerStep (#7) and the memset (no launching call) are dropped.
    assert b["compute_ns"] == 7 * 24 * 50 * US
    assert b["non_compute_ns"] == 30 * US  # the H2D copy
    assert b["idle_ns"] == b["kernel_time_ns"] - b["compute_ns"] - b["non_compute_ns"]
    (full,) = temporal_breakdown(ours, hta_like=False)
    assert full["compute_ns"] == 8 * 24 * 50 * US
    assert full["non_compute_ns"] == 32 * US  # copy + memset


@pytest.mark.skipif(not Path(HTA_PYTHON).exists(), reason=f"HTA venv not found at {HTA_PYTHON} (pip install holistictraceanalysis there); CPU twin: test_breakdown_by_hand")
def test_breakdown_agrees_with_hta(ours, tmp_path):
    shutil.copy(FIX / "new_rank0.json", tmp_path / "rank0.json")
    code = (
        "import json, sys, logging; logging.disable(logging.WARNING)\n"
        "from hta.trace_analysis import TraceAnalysis\n"
        "df = TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)\n"
        "r = df.iloc[0]\n"
        "print(json.dumps({k: float(r[k]) for k in ['idle_time(us)', 'compute_time(us)', 'non_compute_time(us)', 'kernel_time(us)']}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HTA_DISABLE_NS_ROUNDING"] = "1"
    res = subprocess.run([HTA_PYTHON, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, timeout=300, check=True)
    hta = json.loads(res.stdout.strip().splitlines()[-1])
    (b,) = temporal_breakdown(ours)
    for ours_key, hta_key in (("idle_ns", "idle_time(us)"), ("compute_ns", "compute_time(us)"),
                              ("non_compute_ns", "non_compute_time(us)"), ("kernel_time_ns", "kernel_time(us)")):
        assert b[ours_key] == pytest.approx(hta[hta_key] * US, rel=0.01), ours_key
