"""A job's processes are one run: ranks merge only with ranks of their own run, roles are kept,
and a rerun under the same incident id with another world size never mixes runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workflow_lib.snapshot import build as snapshot
from workflow_lib.capture import job
from workflow_lib.core.incident import read_incident

ROOT = Path(__file__).resolve().parent.parent
# A launcher of the user's own: starts N ranks (RANK/WORLD_SIZE as torchrun would) and waits.
LAUNCH = textwrap.dedent("""
    import os, subprocess, sys
    n = int(sys.argv[1])
    procs = [subprocess.Popen([sys.executable, sys.argv[2], *sys.argv[3:]],
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(n))) for r in range(n)]
    sys.exit(max(p.wait() for p in procs))
""")
RANK = textwrap.dedent("""
    import os, sys, time
    from workflow_lib.capture import FlightRecorder
    rank = int(os.environ["RANK"])
    rec = FlightRecorder(incident_id=sys.argv[1], incidents_dir=sys.argv[2], sources=("host",),
                         role="producer" if rank == 0 else "consumer")
    with rec:
        for i in range(4):
            with rec.step(i):
                with rec.span("work"):
                    time.sleep(0.001)
        time.sleep(0.05 * (int(os.environ["WORLD_SIZE"]) - rank))  # the last rank snapshots first
        rec.snapshot("workload_boundary")
""")
# multiprocessing spawn: the main process starts its workers itself (no RANK from a launcher).
SPAWN = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time

    def worker(rank, n, iid, where):
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(n))
        from workflow_lib.capture import FlightRecorder
        rec = FlightRecorder(incident_id=iid, incidents_dir=where, sources=("host",), role="w")
        with rec:
            for i in range(3):
                with rec.step(i):
                    time.sleep(0.001)
            rec.snapshot("workload_boundary")

    if __name__ == "__main__":
        n = int(sys.argv[1])
        ps = [mp.get_context("spawn").Process(target=worker, args=(r, n, sys.argv[2], sys.argv[3])) for r in range(n)]
        for p in ps: p.start()
        for p in ps: p.join()
        sys.exit(max(p.exitcode for p in ps))
""")


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALLCASE_", "TORCHELASTIC_", "SLURM_"))}
    return dict(env, PYTHONPATH=str(ROOT))


def _launch(tmp_path, n, iid):
    (tmp_path / "launch.py").write_text(LAUNCH)
    (tmp_path / "rank.py").write_text(RANK)
    subprocess.run([sys.executable, str(tmp_path / "launch.py"), str(n), str(tmp_path / "rank.py"), iid,
                    str(tmp_path / "inc")], env=_env(), check=True, timeout=120, capture_output=True)


def test_a_rerun_with_another_world_size_never_mixes_runs(tmp_path):
    _launch(tmp_path, 2, "job")
    _launch(tmp_path, 3, "job")  # its rank 2 finds `job` lacking rank 2: it must not join it
    first, second = read_incident(tmp_path / "inc" / "job"), read_incident(tmp_path / "inc" / "job.2")
    assert first.manifest["ranks"] == [0, 1]
    assert second.manifest["ranks"] == [0, 1, 2]
    assert first.manifest["job"]["id"] != second.manifest["job"]["id"]
    assert second.manifest["job"]["world_size"] == 3
    for inc, n in ((first, 2), (second, 3)):
        steps = inc.table("steps").to_pandas()
        assert sorted(steps["rank"].unique()) == list(range(n))
    assert not (tmp_path / "inc" / "job.3").exists()


def test_roles_are_kept_in_the_manifest_and_every_ranked_table(tmp_path):
    _launch(tmp_path, 3, "roles")
    inc = read_incident(tmp_path / "inc" / "roles")
    assert inc.manifest["job"]["roles"] == {"0": "producer", "1": "consumer", "2": "consumer"}
    for name in ("steps", "spans"):
        t = inc.table(name).to_pandas()
        assert dict(zip(t["rank"], t["role"])) == {0: "producer", 1: "consumer", 2: "consumer"}
    snap = snapshot.ingest(tmp_path / "inc" / "roles", tmp_path / "res", tmp_path / "res" / "roles.json")
    assert snap["job"]["roles"]["0"] == "producer"


def test_multiprocessing_spawn_gives_one_incident_per_run(tmp_path):
    (tmp_path / "spawn.py").write_text(SPAWN)
    for _ in range(2):
        subprocess.run([sys.executable, str(tmp_path / "spawn.py"), "3", "mp", str(tmp_path / "inc")],
                       env=_env(), check=True, timeout=120, capture_output=True)
    runs = [read_incident(tmp_path / "inc" / name).manifest for name in ("mp", "mp.2")]
    assert [m["ranks"] for m in runs] == [[0, 1, 2], [0, 1, 2]]
    assert runs[0]["job"]["id"] != runs[1]["job"]["id"]
    # The workload is the main program (spawn gives children the parent's sys.argv).
    assert runs[0]["workload"]["argv"][1:] == [str(tmp_path / "spawn.py"), "3", "mp", str(tmp_path / "inc")]


@pytest.mark.parametrize("env, source", [
    ({"TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "1"}, "torchelastic"),
    ({"TORCHELASTIC_RUN_ID": "none"}, "derived"),  # torchrun's default id is shared by every run
    ({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"}, "slurm"),
    ({job.RUN_ID_ENV: "from-parent"}, "parent"),
    ({}, "derived"),
])
def test_run_identity_sources(env, source):
    got = job.run_identity(env, is_rank=True)
    assert got.source == source
    if source == "torchelastic":
        assert got.run_id == "torchelastic:abc:1"
    if source == "derived":  # a rank derives from its parent's pid and start time
        assert got.run_id.endswith(f":{os.getppid()}:{job._start_ticks(os.getppid())}")


def test_a_parent_passes_its_own_run_id_to_children():
    ident = job.run_identity({}, is_rank=False)
    assert ident.run_id.split(":")[2] == str(os.getpid())
    assert job.child_env(ident, {}) == {job.RUN_ID_ENV: ident.run_id}
    assert job.child_env(job.RunIdentity("torchelastic:x:0", "torchelastic"), {}) == {}


def test_launcher_argv_and_nproc_per_node():
    assert job.is_launcher(["/v/bin/python", "/v/bin/torchrun", "--nproc_per_node", "3", "j.py"])
    assert job.is_launcher(["python", "-m", "torch.distributed.run", "j.py"])
    assert not job.is_launcher(["python", "train.py", "--torchrun"])
    assert job.nproc_per_node(["torchrun", "--nproc-per-node=4", "j.py"]) == 4
    assert job.nproc_per_node(["torchrun", "--nproc_per_node", "3", "j.py"]) == 3
    assert job.nproc_per_node(["torchrun", "j.py"]) is None
    assert job.launcher({}) is None  # not started by torchrun


def test_a_bad_role_is_refused_naming_it():
    with pytest.raises(ValueError, match="STALLCASE_ROLE"):
        job.role_of("pro ducer", {})
    assert job.role_of(None, {"STALLCASE_ROLE": "consumer"}) == "consumer"
    assert job.role_of(None, {}) is None


GLOO_JOB = textwrap.dedent("""
    import time
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    for i in range(5):
        t = torch.ones(4)
        dist.all_reduce(t)
        print(f"step {i} took 2.0 ms", flush=True)
    dist.destroy_process_group()
""")


def test_stallcase_record_around_torchrun_gives_one_incident_per_run(tmp_path):
    pytest.importorskip("torch", reason="torch (CPU) is not installed: pip install torch==2.13.0")
    torchrun = Path(sys.executable).parent / "torchrun"
    stallcase = Path(sys.executable).parent / "stallcase"
    (tmp_path / "job.py").write_text(GLOO_JOB)
    argv = [str(stallcase), "record", "--outside", "--incident", "tr", "--incidents-dir", str(tmp_path / "inc"), "--",
            str(torchrun), "--standalone", "--nproc_per_node", "2", "job.py"]
    for _ in range(2):
        subprocess.run(argv, cwd=tmp_path, env=_env(), check=True, timeout=180, capture_output=True)
    names = sorted(p.name for p in (tmp_path / "inc").iterdir() if not p.name.startswith("."))
    assert len(names) == 2 and names[0] == "tr", names  # one incident per run: the rerun goes beside it
    m = read_incident(tmp_path / "inc" / "tr").manifest
    assert Path(m["workload"]["argv"][0]).name == "torchrun" and m["workload"]["argv"][-1] == "job.py"
