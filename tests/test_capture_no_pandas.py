"""The recorder's snapshot runs inside the user's process: it must not import pandas there
(pyarrow's pa.array/pa.table/to_numpy do, at their first call: half a second and tens of MB
at the workload's first snapshot). workflow_lib/core/arrow.py builds the columns from buffers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from workflow_lib.core import arrow

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
from workflow_lib.capture import FlightRecorder
rec = FlightRecorder(incident_id="np", incidents_dir=sys.argv[1])
with rec:
    for i in range(6):
        with rec.step(i, items=4):
            with rec.span("work"):
                time.sleep(0.002)
    path = rec.snapshot("workload_boundary")
print(json.dumps({"path": str(path), "pandas": "pandas" in sys.modules}))
"""


def test_a_snapshot_in_the_workload_process_does_not_import_pandas(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), STALLCASE_RECORDER="on")
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "inc")], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert (Path(res["path"]) / "manifest.json").is_file(), res
    assert res["pandas"] is False


def test_columns_from_buffers_equal_pyarrows_own():
    ints = np.array([5, -1, 7, 0], np.int64)
    mask = ints < 0
    assert arrow.numbers(ints, mask=mask).equals(pa.array(ints, pa.int64(), mask=mask))
    assert arrow.numbers(ints.astype(np.int32), pa.int32()).equals(pa.array(ints, pa.int32()))
    assert arrow.numbers([1.5, 2.0], pa.float64()).equals(pa.array([1.5, 2.0], pa.float64()))
    assert arrow.bools([True, False, True]).equals(pa.array([True, False, True]))
    names = ["a", None, "ünï", ""]
    assert arrow.strings(names).equals(pa.array(names, pa.string()))
    assert arrow.strings_at(names, [2, 0, 1, 2]).equals(pa.array(["ünï", "a", None, "ünï"], pa.string()))
    assert arrow.strings_at([], np.zeros(0, np.int64)).equals(pa.array([], pa.string()))
    assert arrow.strings_at(["k", "<unknown>"], [-1, 0]).to_pylist() == ["<unknown>", "k"]  # numpy's -1
    # values(): chunked, sliced and with nulls, as numpy
    col = pa.chunked_array([pa.array([1, None, 3], pa.int64()).slice(1), pa.array([4, 5], pa.int64())])
    assert arrow.values(col).tolist() == [-1, 3, 4, 5]
    assert arrow.values(col, null=0).tolist() == [0, 3, 4, 5]
    assert arrow.count_negative(pa.chunked_array([pa.array([-2, None, 3, -1], pa.int64())])) == 2
