"""collective_wait in the diagnosis, from the cross-rank analysis, on the real 2xH200 run:
Kineto traces of both ranks (steps, NCCL kernels) plus their NCCL flight-recorder dumps."""

import json
from pathlib import Path

import pytest

from workflow_lib.diagnose import diagnose_dir
from workflow_lib.importers.kineto import import_kineto
from workflow_lib.importers.torch_fr import import_torch_fr

FIX = Path(__file__).parent / "fixtures" / "h200x2_collectives"


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory):
    d = tmp_path_factory.mktemp("x2")
    import_kineto(sorted(FIX.glob("kineto_rank_*.json.gz")), incident_id="x2", incidents_dir=d)
    out = import_torch_fr(sorted(FIX.glob("nccl_trace_rank_*")), incident_id="x2", incidents_dir=d)
    return diagnose_dir(out)


def _cw(step):
    return next(f for f in step["findings"] if f["check"] == "collective_wait")


def test_injected_wait_in_the_profiled_window_is_attributed_and_placed(diagnosis):
    truth = json.loads((FIX / "truth.json").read_text())
    inj = next(i for i in truth["injected"] if i["step_id"] in truth["profiled_steps"])
    waiter = 1 - inj["rank"]
    for s in diagnosis["steps"]:
        f = _cw(s)
        assert s["explained_ns"] <= s["wall_ns"] and sum(x["explains_ns"] for x in s["findings"]) == s["explained_ns"]
        if (s["rank"], s["step_id"]) == (waiter, inj["step_id"]):
            assert f["verdict"] == "attributed"
            assert abs(f["explains_ns"] - inj["delay_ns"]) <= 0.10 * inj["delay_ns"]
            assert {o["late_rank"] for o in f["evidence"]["ops"] if o.get("role") == "waited"} == {inj["rank"]}
            assert f["evidence"]["placement"].startswith("first wait_ns")
        else:
            assert f["verdict"] != "attributed", (s["rank"], s["step_id"], f)


def test_one_rank_alone_stays_unresolved(tmp_path):
    out = import_kineto([FIX / "kineto_rank_0.json.gz"], incident_id="r0", incidents_dir=tmp_path)
    d = diagnose_dir(out)
    assert {_cw(s)["verdict"] for s in d["steps"]} == {"unresolved"}
