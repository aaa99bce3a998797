"""The plan captured on the H200 (fixture), checked on this CPU machine.

It must block (different device, driver, clocks, binaries), and with a named experiment
proceed as a new experiment whose record lists every difference.
"""

import dataclasses
import shutil
from pathlib import Path

from workflow_lib.core import environment, records, typed
from workflow_lib.plan.types import Plan
from workflow_lib.preflight import check as PF

FIX = Path(__file__).parent / "fixtures" / "h200"


def _plan() -> Plan:
    """The H200 plan, a version 1 record: it reads as the newest version (records.upgrade)."""
    return typed.read(FIX / "demo-ab" / "plan.json", Plan)


def _store(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(FIX / "store", store)
    return store


def test_h200_preflight_passed_on_the_h200():
    for block in ("b000", "b005"):
        rec = records.read_record(FIX / "demo-ab" / "preflight" / f"{block}.json", "preflight")
        assert rec["status"] == "pass" and rec["differences"] == [] and rec["missing"] == []
        assert rec["environment"]["gpu_names"] == ["NVIDIA H200"]


def test_h200_plan_blocks_on_this_cpu_machine(tmp_path):
    plan = _plan()
    rec = PF.preflight(plan, records.digest_of(plan), "b000", _store(tmp_path), results_dir=tmp_path)
    records.validate(rec, "preflight")
    assert rec["status"] == "blocked"
    fields = {d["field"] for d in rec["differences"]}
    assert {"environment.gpu_names", "environment.driver_version", "environment.max_sm_clock_mhz"} <= fields
    assert environment.fingerprint()["gpu_names"] == environment.NOT_OBSERVED  # this machine has no GPU


def test_h200_plan_with_named_experiment_proceeds_and_lists_every_difference(tmp_path):
    plan = dataclasses.replace(_plan(), experiment="h200-plan-on-cpu")
    rec = PF.preflight(plan, records.digest_of(plan), "b000", _store(tmp_path), results_dir=tmp_path)
    records.validate(rec, "preflight")
    assert rec["status"] == "new_experiment" and rec["incident_id"] == "demo" and rec["experiment"] == "h200-plan-on-cpu"
    fields = {d["field"] for d in rec["differences"]}
    assert {"environment.gpu_names", "environment.gpu_count", "environment.driver_version", "environment.power_limit_mw"} <= fields
    # the H200's interpreter and libraries are listed as differences, not silently dropped
    binaries = [a.path for a in plan.artifacts if a.role in ("binary", "library")]
    assert all(any(d["field"].endswith(":" + p) for d in rec["differences"]) or Path(p).is_file() for p in binaries)
    assert rec["missing"] == []


def test_h200_plan_without_its_sources_blocks_even_as_experiment(tmp_path):
    plan = _plan()
    plan = dataclasses.replace(plan, experiment="no-sources", source_root=str(tmp_path / "nowhere"), artifacts=[
        dataclasses.replace(a, path=str(tmp_path / "nowhere" / Path(a.path).name)) if a.role == "source" else a
        for a in plan.artifacts])
    rec = PF.preflight(plan, records.digest_of(plan), "b000", tmp_path / "empty-store", results_dir=tmp_path)
    assert rec["status"] == "blocked" and any(m["role"] == "source" for m in rec["missing"])
