"""Every entry path reaches a plan whose metric the trials can read: a Kineto import with
--workload, and `stallcase record` without a step pattern (one step per run, process wall)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from workflow_lib.plan import build as P
from workflow_lib.preflight import check as PF
from workflow_lib.core import records
from workflow_lib.snapshot import build as snapshot
from workflow_lib.trials import block as trials
from workflow_lib.diagnose import diagnose_dir
from workflow_lib.core.incident import read_incident

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT / "tests" / "fixtures" / "kineto" / "new_rank0.json"
DESIGN = {"blocks": 1, "runs_per_arm": 1, "control_runs": 1, "warmup_runs": 0, "seed": 3, "max_retries": 0,
          "max_failed_fraction": 0.34, "confidence": 0.95, "run_timeout_s": 60,
          "metric": {"name": "t", "source": "auto", "statistic": "median", "skip_steps": 0, "unit": "ns"}}
PROGRAM = "import time, sys\ntime.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0.05)\nprint('done')\n"


def cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "workflow_lib.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _block(tmp_path, inc_dir):
    res = tmp_path / "results"
    snap = snapshot.ingest(inc_dir, res, res / "snapshot.json")
    plan = P.build_plan(snap, records.digest_of(snap), res, design=DESIGN, candidate="baseline")
    pd = records.digest_of(plan)
    pre = PF.preflight(plan, pd, "b000", res, results_dir=res)
    assert pre["status"] == "pass", PF.readable_diff(pre)
    return plan, trials.run_block(plan, pd, pre, records.digest_of(pre), "b000", res, tmp_path / "work")


def test_kineto_import_takes_the_workload_command(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    r = cli("import", "kineto", str(KINETO), "--incident", "kx", "--incidents-dir", str(tmp_path / "inc"),
            "--workload", "--", sys.executable, "prog.py", "0.05", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    inc = read_incident(tmp_path / "inc" / "kx")
    w = inc.manifest["workload"]
    assert w["argv"] == [sys.executable, "prog.py", "0.05"] and w["cwd"] == str(tmp_path)
    assert any(a["role"] == "source" and a["path"] == str(tmp_path / "prog.py") for a in inc.manifest["artifacts"])
    plan, ex = _block(tmp_path, tmp_path / "inc" / "kx")
    assert ex.status == "complete", ex.notes
    assert {r.metric_source for r in ex.runs} == {"process_wall"}
    assert all(r.metric_ns >= 50e6 for r in ex.runs)


def test_kineto_import_without_a_program_is_one_line_error(tmp_path):
    r = cli("import", "kineto", str(KINETO), "--incident", "kx", "--incidents-dir", str(tmp_path / "inc"),
            "--workload", "--", "no-such-program-xyz", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: --workload") and len(r.stderr.splitlines()) == 1


def test_record_without_step_pattern_gets_a_per_run_metric(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    r = cli("record", "--outside", "--incident", "rx", "--incidents-dir", str(tmp_path / "inc"), "--",
            sys.executable, "prog.py", "0.1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no --step-pattern" in r.stderr and "process wall time" in r.stderr
    inc = read_incident(tmp_path / "inc" / "rx")
    steps = inc.table("steps").to_pandas()
    assert len(steps) == 1 and steps.end_ns.iloc[0] - steps.start_ns.iloc[0] >= 100e6
    assert inc.manifest["recorder"]["steps"]["from"] == "process"
    assert any(a["role"] == "source" and a["path"].endswith("prog.py") for a in inc.manifest["artifacts"])
    assert diagnose_dir(tmp_path / "inc" / "rx")["steps"][0]["wall_ns"] >= 100e6  # the diagnose rule has a step
    plan, ex = _block(tmp_path, tmp_path / "inc" / "rx")
    assert ex.status == "complete", ex.notes
    assert {r.metric_source for r in ex.runs} == {"process_wall"} and all(r.metric_ns >= 100e6 for r in ex.runs)


def test_record_with_step_pattern_times_the_printed_steps(tmp_path):
    (tmp_path / "steps.py").write_text(textwrap.dedent("""
        import time
        for i in range(5):
            t = time.perf_counter(); time.sleep(0.02)
            print(f"step {i} took {(time.perf_counter() - t) * 1e3:.2f} ms", flush=True)
    """))
    pat = r"step (?P<step>\d+) took (?P<ms>[\d.]+) ms"
    r = cli("record", "--incident", "sx", "--incidents-dir", str(tmp_path / "inc"), "--step-pattern", pat, "--",
            sys.executable, "steps.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan, ex = _block(tmp_path, tmp_path / "inc" / "sx")
    assert plan.design.metric.step_pattern == pat
    assert ex.status == "complete", ex.notes
    assert {r.metric_source for r in ex.runs} == {"stdout_steps"}
    assert all(len(r.values_ns) == 5 and 19e6 <= r.metric_ns < 200e6 for r in ex.runs)
