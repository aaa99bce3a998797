"""A trial run notes when other processes loaded the machine, and the comparison says so
(trials/host_load.py): the run's own process tree is not counted as the machine's other work."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from workflow_lib.compare import build as compare
from workflow_lib.core import records
from workflow_lib.trials import host_load
from workflow_lib.trials.runner import LocalRunner, RunRequest

from benchmarks.compare_builders import design, executions, lognormal_values, plan, typed_design, typed_records

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def test_other_share_is_the_machines_busy_time_less_the_runs_own_over_its_capacity():
    before = host_load.Sample(wall_s=10.0, machine_busy_s=100.0, own_s=5.0)
    after = host_load.Sample(wall_s=12.0, machine_busy_s=103.0, own_s=6.0)  # 3 CPU-s busy, 1 of them the run's
    assert host_load.other_share(before, after, cpus=2) == 0.5
    assert host_load.other_share(before, after, cpus=8) == 0.125
    unreadable = host_load.Sample(wall_s=12.0, machine_busy_s=None, own_s=6.0)
    assert host_load.other_share(before, unreadable, cpus=2) is None
    assert host_load.note(0.5, cpus=2) == "machine busy: other processes used 50% of its 2 CPUs during the run"
    assert host_load.note(host_load.BUSY_SHARE - 0.01, cpus=2) is None and host_load.note(None) is None


def test_a_reaped_childs_cpu_is_the_runs_own_and_a_process_beside_it_is_the_machines():
    before = host_load.sample()
    subprocess.run([sys.executable, "-c", SPIN.format(s=0.5)], check=True)  # the run: reaped
    mid = host_load.sample()
    assert mid.own_s - before.own_s >= 0.5
    assert mid.machine_busy_s - before.machine_busy_s >= 0.45  # the kernel saw the same work
    hog = subprocess.Popen([sys.executable, "-c", SPIN.format(s=30)])  # beside the run, not reaped in the window
    try:
        time.sleep(0.3)
        cpu0, s0 = _cpu_s(hog.pid), host_load.sample()
        time.sleep(1.5)
        s1, cpu1 = host_load.sample(), _cpu_s(hog.pid)
    finally:
        hog.kill()
        hog.wait()
    other = (s1.machine_busy_s - s0.machine_busy_s) - (s1.own_s - s0.own_s)
    assert other >= 0.9 * (cpu1 - cpu0) - 0.05, (other, cpu1 - cpu0)  # the hog's CPU, at least, is other work


def test_a_run_beside_a_cpu_hog_carries_the_busy_note(tmp_path):
    des = {"max_retries": 0, "run_timeout_s": 60,
           "metric": {"name": "t", "source": "process_wall", "statistic": "median", "unit": "ns", "skip_steps": 0}}
    req = RunRequest({"argv": [sys.executable, "-c", "import time; time.sleep(1.5)"], "cwd": str(tmp_path), "env": {}},
                     typed_design(des), {"index": 0, "arm": "A"}, 0, {})
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN.format(s=30)]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)
        got = LocalRunner().run(req)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert got.status == "ok", got.error
    busy = [u for u in got.unusual if u.startswith(host_load.BUSY_NOTE)]
    assert len(busy) == 1 and f"of its {os.cpu_count()} CPUs" in busy[0], got.unusual


def test_the_comparison_says_how_many_runs_a_busy_machine_held():
    pl = plan(design())
    ex, _, pd = executions(pl, lognormal_values(5, effect=-0.3))
    note = host_load.note(0.62, cpus=2)
    marked = 0
    for e in list(ex.values())[:2]:
        for r in e["runs"]:
            if r["arm"] != "warmup":
                r["unusual"] = [note]
                marked += 1
    digests = {b: records.digest_of(e) for b, e in ex.items()}
    rec = compare.compare(*typed_records(pl, ex), digests, pd).to_json()
    timed = sum(r["arm"] != "warmup" and r["status"] == "ok" for e in ex.values() for r in e["runs"])
    said = [w for w in rec["warnings"] if w.startswith("the machine was busy")]
    assert said == [f"the machine was busy during {marked} of {timed} runs: other processes used at least 25% of its "
                    "CPUs (up to 62% of its CPUs); the noise floor holds their noise too: run the trials on a quiet "
                    "machine (or with its other work stopped) for the floor of the program alone"]
    assert said[0] in rec["reasons"]
    quiet, _, pd = executions(pl, lognormal_values(5, effect=-0.3))
    rec = compare.compare(*typed_records(pl, quiet), {b: records.digest_of(e) for b, e in quiet.items()}, pd).to_json()
    assert not any(w.startswith("the machine was busy") for w in rec.get("warnings") or [])
