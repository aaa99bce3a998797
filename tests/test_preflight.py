"""Preflight mutation suite: every change of environment or artifact blocks, naming the field."""

import copy
import dataclasses
import os

import pytest

from workflow_lib.core import environment, records
from workflow_lib.plan import build as P
from workflow_lib.preflight import check as PF, rule as preflight_rule
from workflow_lib.snapshot import build as snapshot
from workflow_lib.core.cas import CAS
from workflow_lib.core.errors import PreflightBlocked

from incident_factory import make_incident
from test_plan import DESIGN


class FakeNVML:
    """Stands in for the NVML library, which this CPU machine cannot reach (edge mock)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, **over):
        self.v = {"name": "NVIDIA H200", "uuid": "GPU-1234", "driver": "580.159.04", "app_sm": 1980, "app_mem": 3201,
                  "max_sm": 1980, "max_mem": 3201, "reasons": 1, "persist": 1, "ecc": [1, 1], "mig": [0, 0],
                  "compute": 0, "power": 700000}
        self.v.update(over)

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlDeviceGetCount(self): return 1
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlDeviceGetName(self, h): return self.v["name"]
    def nvmlDeviceGetUUID(self, h): return self.v["uuid"]
    def nvmlSystemGetDriverVersion(self): return self.v["driver"]
    def nvmlDeviceGetApplicationsClock(self, h, c): return self.v["app_sm"] if c == 1 else self.v["app_mem"]
    def nvmlDeviceGetMaxClockInfo(self, h, c): return self.v["max_sm"] if c == 1 else self.v["max_mem"]
    def nvmlDeviceGetCurrentClocksEventReasons(self, h): return self.v["reasons"]
    def nvmlDeviceGetPersistenceMode(self, h): return self.v["persist"]
    def nvmlDeviceGetEccMode(self, h): return self.v["ecc"]
    def nvmlDeviceGetMigMode(self, h): return self.v["mig"]
    def nvmlDeviceGetComputeMode(self, h): return self.v["compute"]
    def nvmlDeviceGetPowerManagementLimit(self, h): return self.v["power"]


def gpu_env(**over):
    return environment.fingerprint(nvml=FakeNVML(**over), with_nvcc=False)


def _plan(tmp_path, env_fp, experiment=None):
    inc = make_incident(tmp_path, env_fp=env_fp)
    snap = snapshot.ingest(inc, tmp_path / "results", tmp_path / "results" / "snapshot.json")
    return P.build_plan(snap, records.digest_of(snap), tmp_path / "results", design=DESIGN, candidate="baseline", experiment=experiment)


def _pf(tmp_path, plan, env):
    return PF.preflight(plan, records.digest_of(plan), "b000", tmp_path / "results", results_dir=tmp_path / "results", observed_env=env)


@pytest.mark.parametrize("change,field", [
    ({"driver": "580.160.01"}, "environment.driver_version"),
    ({"app_sm": 1755}, "environment.app_sm_clock_mhz"),
    ({"max_sm": 1755}, "environment.max_sm_clock_mhz"),
    ({"mig": [1, 1]}, "environment.mig_mode"),
    ({"name": "NVIDIA H100 80GB HBM3"}, "environment.gpu_names"),
    ({"ecc": [0, 0]}, "environment.ecc_mode"),
    ({"power": 500000}, "environment.power_limit_mw"),
])
def test_environment_mutation_blocks_with_field_named(tmp_path, change, field):
    plan = _plan(tmp_path, gpu_env())
    rec = _pf(tmp_path, plan, gpu_env(**change))
    assert rec["status"] == "blocked"
    assert [d["field"] for d in rec["differences"]] == [field]
    records.validate(rec, "preflight")


def test_swapped_shared_library_blocks(tmp_path):
    plan = _plan(tmp_path, gpu_env())
    (tmp_path / "libfake.so").write_bytes(b"\x7fELF another build")
    rec = _pf(tmp_path, plan, gpu_env())
    assert rec["status"] == "blocked"
    assert [d["field"] for d in rec["differences"]] == [f"artifact.library:{tmp_path / 'libfake.so'}"]


def test_deleted_binary_blocks(tmp_path):
    plan = _plan(tmp_path, gpu_env())
    plan = copy.deepcopy(plan)
    fake_bin = tmp_path / "python-bin"
    fake_bin.write_bytes(b"binary")
    from incident_factory import art
    from workflow_lib.plan.types import Artifact

    plan.artifacts.append(Artifact.from_json(art("binary", fake_bin)))
    fake_bin.unlink()
    rec = _pf(tmp_path, plan, gpu_env())
    assert rec["status"] == "blocked"
    assert [(m["role"], m["path"]) for m in rec["missing"]] == [("binary", str(fake_bin))]


def test_edited_input_blocks_when_store_lacks_it(tmp_path):
    plan = _plan(tmp_path, gpu_env())
    inp = next(a for a in plan.artifacts if a.role == "input")
    CAS(tmp_path / "results").path_for(inp.digest).unlink()
    (tmp_path / "data.bin").write_bytes(b"edited")
    rec = _pf(tmp_path, plan, gpu_env())
    assert rec["status"] == "blocked"
    assert [d["field"] for d in rec["differences"]] == [f"artifact.input:{tmp_path / 'data.bin'}"]


def test_edited_source_blocks_when_store_lacks_it(tmp_path):
    plan = _plan(tmp_path, gpu_env())
    src = next(a for a in plan.artifacts if a.role == "source")
    CAS(tmp_path / "results").path_for(src.digest).unlink()
    (tmp_path / "src" / "work.py").write_text("print('edited')\n")
    rec = _pf(tmp_path, plan, gpu_env())
    assert rec["status"] == "blocked"
    assert f"artifact.source:{tmp_path / 'src' / 'work.py'}" in [d["field"] for d in rec["differences"]]


def test_corrupt_store_copy_is_missing(tmp_path):
    plan = _plan(tmp_path, gpu_env())
    inp = next(a for a in plan.artifacts if a.role == "input")
    obj = CAS(tmp_path / "results").path_for(inp.digest)
    obj.write_bytes(b"rot")
    rec = _pf(tmp_path, plan, gpu_env())
    assert rec["status"] == "blocked" and "corrupt" in rec["missing"][0]["problem"]


def test_fifty_unchanged_reruns_never_block(tmp_path):
    plan = _plan(tmp_path, environment.fingerprint(with_nvcc=False))
    statuses = {_pf(tmp_path, plan, environment.fingerprint(with_nvcc=False))["status"] for _ in range(50)}
    assert statuses == {"pass"}


def test_changed_environment_proceeds_only_as_named_experiment(tmp_path):
    h200 = gpu_env()
    cpu = environment.fingerprint(with_nvcc=False)
    plan = _plan(tmp_path, h200)
    assert _pf(tmp_path, plan, cpu)["status"] == "blocked"
    named = dataclasses.replace(plan, experiment="on-cpu")
    rec = _pf(tmp_path, named, cpu)
    assert rec["status"] == "new_experiment" and rec["incident_id"] == "inc1" and rec["experiment"] == "on-cpu"
    assert {"environment.gpu_names", "environment.driver_version"} <= {d["field"] for d in rec["differences"]}
    # the same name with yet another environment is refused
    other = dict(cpu, cpu_model="Another CPU")
    assert _pf(tmp_path, named, other)["status"] == "blocked"


def test_run_preflight_blocked_keeps_log_writes_no_record(tmp_path):
    plan = _plan(tmp_path, gpu_env())
    records.write_record(tmp_path / "plan.json", plan.to_json(), "plan")
    out, log = tmp_path / "preflight" / "b000.json", tmp_path / "logs" / "preflight-b000.json"
    with pytest.raises(PreflightBlocked, match="environment.gpu_names"):
        preflight_rule.run(tmp_path / "plan.json", "b000", tmp_path / "results", out, results_dir=tmp_path / "results", blocked_path=log)
    assert not out.exists() and records.read_record(log, "preflight")["status"] == "blocked"


def test_another_gpu_of_the_same_model_does_not_block(tmp_path):
    plan = _plan(tmp_path, gpu_env(uuid="GPU-aaaa"))
    rec = _pf(tmp_path, plan, gpu_env(uuid="GPU-bbbb"))
    assert rec["status"] == "pass" and rec["environment"]["gpu_uuids"] == ["GPU-bbbb"]


class TwoGpuNVML(FakeNVML):
    """A node with two GPUs; the second is busy with another job and reports a power cap."""

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}{h}{h}{h}"

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 | 0x2 if h == 1 else self.v["reasons"]

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"


def test_only_the_jobs_visible_gpus_are_fingerprinted(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    one = environment.fingerprint(nvml=TwoGpuNVML(), with_nvcc=False)
    assert one["gpu_count"] == 1 and one["gpu_uuids"] == ["GPU-0000"] and one["clock_event_reasons_setting"] == [0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1111")
    other = environment.fingerprint(nvml=TwoGpuNVML(), with_nvcc=False)
    assert other["gpu_uuids"] == ["GPU-1111"] and other["clock_event_reasons_setting"] == [0x2]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert environment.fingerprint(nvml=TwoGpuNVML(), with_nvcc=False)["gpu_count"] == 2


def test_identical_gpus_with_other_uuids_share_one_experiment(tmp_path):
    plan = _plan(tmp_path, gpu_env(), experiment="fanout")
    for uuid in ("GPU-aaaa", "GPU-bbbb", "GPU-cccc"):
        rec = _pf(tmp_path, plan, gpu_env(uuid=uuid))
        assert rec["status"] == "pass", PF.readable_diff(rec)
    assert PF.registry_digest(gpu_env(uuid="GPU-aaaa")) == PF.registry_digest(gpu_env(uuid="GPU-zzzz"))
    assert PF.registry_digest(gpu_env(driver="1")) != PF.registry_digest(gpu_env())


def _race(tmp_path, gpus):
    import subprocess
    import sys
    from pathlib import Path

    plan = _plan(tmp_path, gpu_env(), experiment="race")
    P.write_plan(plan, tmp_path / "plan.json", tmp_path / "results")
    go = tmp_path / "go"
    child = Path(__file__).with_name("preflight_children.py")
    procs = [subprocess.Popen([sys.executable, str(child), str(tmp_path / "plan.json"), str(tmp_path / "results"), drv, uuid, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for drv, uuid in gpus]
    import time

    time.sleep(3.0)  # let every child load and reach its wait loop
    go.write_text("")
    out = []
    for p in procs:
        so, se = p.communicate(timeout=120)
        assert p.returncode == 0, se[-2000:]
        out.append(so.strip())
    return out


def test_concurrent_preflights_on_identical_gpus_all_pass(tmp_path):
    statuses = _race(tmp_path, [("580.159.04", f"GPU-{i:04d}") for i in range(6)])
    assert statuses == ["pass"] * 6
    import json

    assert len(json.loads((tmp_path / "results" / "experiments.json").read_text())) == 1


def test_concurrent_preflights_with_different_drivers_bind_exactly_one(tmp_path):
    """The registry is read and written under a lock: of two drivers racing, exactly one registers."""
    gpus = [("580.159.04" if i % 2 else "999.0.0", f"GPU-{i:04d}") for i in range(8)]
    statuses = _race(tmp_path, gpus)
    by_driver = {}
    for (drv, _), st in zip(gpus, statuses):
        by_driver.setdefault(drv, set()).add(st)
    # one driver's blocks all bound (pass, or new_experiment when it differs from the plan); the other's all blocked
    assert sorted(map(sorted, by_driver.values())) in ([["blocked"], ["pass"]], [["blocked"], ["new_experiment"]]), by_driver
