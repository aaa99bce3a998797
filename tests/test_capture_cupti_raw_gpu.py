"""On a GPU: the raw-buffer parser and cupti-python's record objects record the same kernels and
copies of one deterministic loop (a process each: CUPTI takes one subscriber). The CPU twins
are test_capture_cupti_parse.py's side-by-side ingest and its libcupti iterator check."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.core.incident import read_incident

ROOT = Path(__file__).resolve().parents[1]
PROG = """
import sys, torch
from workflow_lib.capture import FlightRecorder
rec = FlightRecorder(incident_id="raw", incidents_dir=sys.argv[1], sources=("host", "cupti"), cupti_parser=sys.argv[2])
x = torch.ones(256, 256, device="cuda")
host = torch.ones(1 << 16).pin_memory()
torch.cuda.synchronize()
with rec:
    for i in range(20):
        with rec.step(i):
            y = x @ x
            y.add_(1.0)
            d = host.to("cuda", non_blocking=True)
            d.sum().item()
    torch.cuda.synchronize()
    print(rec.snapshot("workload_boundary"))
"""


def _cuda_and_cupti() -> str | None:
    try:
        import torch
    except ImportError:
        return "needs torch"
    if not torch.cuda.is_available():
        return "needs a CUDA device"
    try:
        from cupti import cupti  # noqa: F401
    except Exception as exc:
        return f"needs cupti-python ({type(exc).__name__})"
    return None


@pytest.mark.skipif(_cuda_and_cupti() is not None, reason=str(_cuda_and_cupti()))
def test_raw_and_binding_parsers_record_the_same_kernels_and_copies(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    got = {}
    for parser in ("raw", "binding"):
        out = subprocess.run([sys.executable, "-c", PROG, str(tmp_path / parser), parser], env=env,
                             capture_output=True, text=True, check=True)
        inc = read_incident(out.stdout.strip().splitlines()[-1])
        detail = inc.manifest["sources"]["cupti"]["detail"]
        assert detail["parser"] == parser, detail.get("parser_note")
        if parser == "raw":
            assert detail["raw_buffers"] > 0 and detail["raw_buffers_unread"] == 0, detail["errors"]
        k = inc.table("kernels").to_pandas()
        m = inc.table("memcpy").to_pandas()
        got[parser] = (collections.Counter(k["name"]), collections.Counter(m["kind"]), len(inc.table("runtime_api")))
    raw, binding = got["raw"], got["binding"]
    assert raw[0] == binding[0] and sum(raw[0].values()) >= 40  # the same kernels, by name and count
    assert raw[1] == binding[1] and raw[1].get("HtoD", 0) >= 20
    # Runtime calls: the same filter on both paths; two processes may differ by a few calls
    # (allocator, event queries), never by whole launches.
    assert raw[2] > 0 and abs(raw[2] - binding[2]) <= 0.1 * binding[2]
