"""Issue 29's input families, one test (or a few) each, with inputs made here (the corpus,
tests/corpus/round3.py, holds more of each): numbers that are not numbers, sizes without
caps, structures that are not what they claim, amplification (peak RSS measured in a child),
messages that name the user's input, warnings from numeric code, and refused candidates whose
error must reach the terminal from a real Snakemake run.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from workflow_lib import cli
from workflow_lib.core import config, numeric_warnings, tables
from workflow_lib.core.config import numbers as ON
from workflow_lib.plan import schedule
from workflow_lib.compare import stats
from workflow_lib.capture.sidecar import parse_triggers
from workflow_lib.capture.trigger import LatencyTrigger
from workflow_lib.collectives.dump_detail import dump_details
from workflow_lib.core.errors import InputError, StallcaseError
from workflow_lib.core.formats import fr_dump

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import generate as CG  # noqa: E402  (the corpus's incident builders)

MAX_RSS = ON.MEMORY_BUDGET_BYTES
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def check_config(partial: dict) -> None:
    """The whole config check on `partial` merged over the workflow's defaults (as Snakemake merges it)."""
    config.check(config.merge(config.load([], []), partial))


def _defaults() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _trials(**kw) -> dict:
    cfg = _defaults()
    cfg["trials"].update(kw)
    return cfg


# The CLI's main in a child that writes its own high-water mark (VmHWM) to the file named first:
# RUSAGE_CHILDREN would be the largest of every child the session waited for, and a child
# started by fork or vfork starts from the session's own size.
_CLI_HWM = """
import sys
out = sys.argv.pop(1)
from workflow_lib.cli import main
try:
    rc = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as fh:
        hwm = [line for line in fh if line.startswith("VmHWM:")][0].split()[1]
    with open(out, "w") as fh:
        fh.write(hwm)
sys.exit(rc)
"""


def cli_child(argv: list[str], cwd: Path) -> tuple[int, list[str], int]:
    """The CLI with ARGV in a child: (status, stderr lines, the child's own peak RSS in bytes)."""
    hwm = Path(cwd) / ".cli-hwm"
    p = subprocess.run([sys.executable, "-c", _CLI_HWM, str(hwm), *argv], cwd=cwd, capture_output=True, text=True,
                       timeout=300, env=ENV)
    peak = int(hwm.read_text()) * 1024
    hwm.unlink()
    assert peak > 0
    return p.returncode, p.stderr.splitlines(), peak


# ---------------------------------------------------------------- numbers that are not numbers

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "nan", "inf", "Infinity", "\u00b2", "\u0663", "", True, None, [1]])
def test_a_non_finite_or_non_number_option_is_refused_naming_it_and_its_range(value):
    spec = ON.Spec(0, 10, "ms")
    with pytest.raises(StallcaseError) as exc:
        ON.number(value, "--my-option", spec)
    assert exc.value.where == "--my-option"
    assert "accepts a finite number in [0, 10] ms" in exc.value.problem


def test_a_number_option_reads_ascii_text_and_checks_its_range():
    assert ON.number("2.5", "--x", ON.Spec(0, 10, "ms")) == 2.5
    assert ON.number("1e3", "--n", ON.Spec(0, 10**4, "steps", integer=True)) == 1000
    with pytest.raises(StallcaseError, match=r"is 1.5, not a whole number: accepts an integer in \[0, 5\] steps"):
        ON.number(1.5, "--n", ON.Spec(0, 5, "steps", integer=True))
    with pytest.raises(StallcaseError, match=r"accepts a finite number in \(1, 1000\]"):
        ON.number(1, "k", ON.Spec(1, 1000, "x", lo_open=True))


@pytest.mark.parametrize("key,value,words", [
    ("blocks", 10**9, "trials.blocks: is 1000000000: accepts an integer in [1, 8192] blocks"),
    ("blocks", 1e9, "trials.blocks: is 1000000000"),
    ("runs_per_arm", 10**8, "trials.runs_per_arm: is 100000000: accepts an integer in [1, 262144] runs"),
    ("warmup_runs", 10**7, "trials.warmup_runs: is 10000000"),
    ("confidence", math.nan, "trials.confidence: is nan: accepts a finite number in (0, 1)"),
    ("run_timeout_s", math.inf, "trials.run_timeout_s: is inf"),
    ("max_failed_fraction", math.nan, "trials.max_failed_fraction: is nan"),
])
def test_config_sizes_and_non_finite_numbers_are_refused_at_config_check(key, value, words):
    with pytest.raises(StallcaseError) as exc:
        check_config(_trials(**{key: value}))
    assert words in exc.value.oneline()


def test_blocks_times_runs_over_the_memory_budget_is_refused_with_the_number_and_the_cap():
    with pytest.raises(StallcaseError) as exc:
        check_config(_trials(blocks=8000, runs_per_arm=100, control_runs=0, warmup_runs=0))
    msg = exc.value.oneline()
    assert "8000 x 200 = 1600000 runs" in msg and f"over the cap of {ON.MAX_RUNS} runs" in msg
    assert ON.MAX_RUNS * ON.BYTES_PER_RUN <= ON.MEMORY_BUDGET_BYTES // 2


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_a_design_that_can_never_conclude_is_refused_with_the_fewest_blocks(confidence):
    need = stats.min_blocks(confidence)
    assert need == {0.9: 5, 0.95: 6, 0.99: 8}[confidence]
    with pytest.raises(StallcaseError, match=f"no interval exists below {need} blocks.*use blocks >= {need}"):
        check_config(_trials(blocks=need - 1, confidence=confidence))
    check_config(_trials(blocks=need, confidence=confidence))  # exactly the fewest: accepted


def test_a_stdout_regex_metric_without_a_regex_is_refused_at_config_check():
    metric = {"name": "t", "source": "stdout_regex", "statistic": "median", "unit": "ms"}
    with pytest.raises(StallcaseError, match="config trials.metric.regex: is missing"):
        check_config(_trials(metric=metric))
    from workflow_lib.plan.metric import MetricUnreadable, read

    with pytest.raises(MetricUnreadable, match="no regex"):  # a hand-edited plan: no KeyError either
        read(metric, Path("/nonexistent"), "t=1", 1)


def test_the_schedule_refuses_an_oversized_design_before_allocating_it():
    with pytest.raises(StallcaseError, match="over the cap"):
        schedule.make_schedule({"blocks": 6, "runs_per_arm": 10**8, "control_runs": 0, "warmup_runs": 0, "seed": 1})
    with pytest.raises(StallcaseError, match="must be integers"):
        schedule.make_schedule({"blocks": 6, "runs_per_arm": math.inf, "control_runs": 0, "warmup_runs": 0, "seed": 1})


@pytest.mark.parametrize("spec,words", [
    ("latency:k=nan", "--trigger latency:k: is 'nan'"), ("latency:k=inf", "--trigger latency:k: is 'inf'"),
    ("latency:window=1000000000000", "accepts an integer in [3, 1048576] steps"),
    ("latency:warmup=-1", "accepts an integer in [0, 1000000000] steps"),
])
def test_recorder_trigger_options_go_through_the_one_check(spec, words):
    with pytest.raises(StallcaseError) as exc:
        parse_triggers([spec])
    assert words in exc.value.oneline()
    with pytest.raises(ValueError, match="LatencyTrigger.k"):  # the in-process API: a ValueError, same check
        LatencyTrigger(k=math.nan)
    assert parse_triggers(["latency:k=3,window=8"])[1].k == 3.0


def test_collectives_min_wait_flag_refuses_nan_in_one_line(tmp_path, capsys):
    assert cli.main(["collectives", str(tmp_path / "none"), "--min-wait-ms", "nan"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["error: --min-wait-ms: is 'nan', not a number: accepts a finite number in [0, 3600000] ms (ASCII digits)"]


# ---------------------------------------------------------------- structures that are not what they claim

def test_a_parquet_table_with_a_column_twice_is_one_line_naming_the_file(tmp_path):
    f = tmp_path / "steps.parquet"
    pq.write_table(pa.table([pa.array([0, 1]), pa.array([7, 7]), pa.array([1, 1]), pa.array([5, 9]), pa.array([6, 10])],
                            names=["step_id", "thread_id", "step_id", "start_ns", "end_ns"]), f)
    with pytest.raises(InputError) as exc:
        tables.read_table(f, "steps")
    assert exc.value.where == str(f) and "'step_id' more than once" in exc.value.problem


@pytest.mark.parametrize("dumps,words", [
    ({"0": None}, None), ({"0": "x"}, "dumps.0 is str"), ([], "dumps is list"),
    ({"0": {"groups": {"pg": None}}}, "groups.pg is null"), ({"0": {"wrapped_reason": "r"}}, "has wrapped_reason but no wrapped"),
    ({"\u00b9": {}}, "is not a decimal integer"), ({"0": {"groups": {"pg": {"last_started": -5}}}}, "outside [0,"),
])
def test_manifest_dump_details_are_shape_checked(tmp_path, dumps, words):
    m = {"sources": {"torch_fr": {"status": "observed", "reason": None, "detail": {"dumps": dumps}}}}
    if words is None:
        assert dump_details(m, tmp_path) == {}
        return
    with pytest.raises(InputError) as exc:
        dump_details(m, tmp_path)
    assert exc.value.where == str(tmp_path / "manifest.json") and words in exc.value.problem


def _fr(**entry) -> dict:
    e = {"record_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1, "profiling_name": "nccl:all_reduce",
         "time_created_ns": 1, "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"],
         "output_dtypes": ["Float"], "state": "completed"}
    e.update(entry)
    return {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}, "entries": [e]}


def test_a_structured_or_huge_flight_recorder_state_is_an_error_not_a_printed_structure():
    deep: list = []
    for _ in range(200):
        deep = [deep]
    for state, words in [(deep, "state is a list"), ({"a": list(range(10_000))}, "state is a dict"),
                         ("scheduled" * 100_000, "state is 'scheduledscheduled")]:
        with pytest.raises(InputError) as exc:
            fr_dump.dump_table(_fr(state=state), 0, "d.pkl")
        assert words in exc.value.problem and len(exc.value.oneline()) < 300


@pytest.mark.parametrize("dump,words", [
    ({"pg_status": {"\u0661": {"last_completed_collective": 1}}}, "not a process-group id"),
    ({"pg_status": {"0": {"last_completed_collective": "\u0661"}}}, "expected an integer >= -1"),
    ({"pg_config": {"0": {"name": "0", "desc": "d", "ranks": "[\u0660, \u0661]"}}}, "expected a list like"),
])
def test_digits_that_are_not_ascii_are_not_numbers_in_a_dump(dump, words):
    d = dict(_fr(), **dump)
    with pytest.raises(InputError, match=words):
        fr_dump.dump_detail(d, fr_dump.dump_table(d, 0, "d.pkl"), "d.pkl")
    assert fr_dump._thread_id("\u00b2") is None  # '²'.isdigit() is True; int('²') raises


def test_a_binary_config_file_is_one_line_in_doctor_and_check_config(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    f.write_bytes(b"trials:\n  blocks: \xff\xfe\x00")
    for argv in (["doctor", str(f)], ["check-config", str(f)]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {f}: not UTF-8 text"), err


# ---------------------------------------------------------------- amplification, peak RSS measured

def test_a_small_dump_whose_group_list_repeats_in_every_row_is_refused_within_the_cap(tmp_path):
    """A JSON dump of 1.4 MB: 6,000 entries of a 4,000-rank group would be 170 MB of group_ranks text."""
    d = _fr()
    d["pg_config"]["0"]["ranks"] = str(list(range(4000)))
    d["entries"] = [dict(d["entries"][0], record_id=i, collective_seq_id=i + 1) for i in range(6000)]
    f = tmp_path / "nccl_trace_rank_0.json"
    f.write_text(json.dumps(d))
    assert f.stat().st_size < 2 << 20
    rc, err, peak = cli_child(["import", "torch-fr", str(f), "--incident", "amp", "--incidents-dir", str(tmp_path / "inc")], tmp_path)
    assert rc == 2 and len(err) == 1 and "bytes of text, over the limit" in err[0] and str(f) in err[0], err
    assert peak < MAX_RSS and not (tmp_path / "inc" / "amp").exists()


def test_ops_times_member_ranks_over_the_analysis_cap_is_refused_within_the_memory_cap(tmp_path):
    ranks = 1200
    ops = ON.MAX_MATCH_CELLS // ranks + 10  # just over the cap
    d = _fr()
    d["pg_config"]["0"]["ranks"] = str(list(range(ranks)))
    d["entries"] = [dict(d["entries"][0], record_id=i, collective_seq_id=i + 1) for i in range(ops)]
    f = tmp_path / "nccl_trace_rank_0.json"
    f.write_text(json.dumps(d))
    rc, err, _ = cli_child(["import", "torch-fr", str(f), "--incident", "wide", "--incidents-dir", str(tmp_path / "inc")], tmp_path)
    assert rc == 0, err
    rc, err, peak = cli_child(["collectives", str(tmp_path / "inc" / "wide")], tmp_path)
    assert rc == 2 and len(err) == 1 and f"{ops} ops x {ranks} member ranks" in err[0] and "over the analysis's cap" in err[0], err
    assert peak < MAX_RSS


def test_an_incident_over_the_step_cap_is_refused_by_the_diagnosis_within_the_memory_cap(tmp_path):
    inc = CG.good_incident(tmp_path / "inc")
    n = ON.MAX_DIAGNOSED_STEPS + 1
    starts = 1_000_000 + np.arange(n, dtype=np.int64) * 1_000_000
    t = tables.conform("steps", pa.table({"step_id": np.arange(n), "thread_id": np.full(n, 7), "start_ns": starts,
                                          "end_ns": starts + 900_000, "rank": pa.nulls(n, pa.int32())}))
    f = inc / "tables" / "steps.parquet"
    pq.write_table(t, f, use_dictionary=False, column_encoding={c: "DELTA_BINARY_PACKED" for c in ("step_id", "thread_id", "start_ns", "end_ns")})
    m = CG.read_manifest(inc)
    m["tables"]["steps"] = {"path": "tables/steps.parquet", "rows": n, "digest": CG.hash_file(f)}
    CG.write_manifest(inc, m)
    rc, err, peak = cli_child(["diagnose", str(inc), "-o", str(tmp_path / "d.json")], tmp_path)
    assert rc == 2 and err == [f"error: {inc}: {n} steps to diagnose, over the cap of {ON.MAX_DIAGNOSED_STEPS} "
                               f"(1 KiB a step within the 2 GiB memory budget): record a shorter window of the run"], err
    assert peak < MAX_RSS and not (tmp_path / "d.json").exists()


# ---------------------------------------------------------------- messages that name the user's input

def _kineto(tmp_path: Path, events: list[dict]) -> Path:
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": events}))
    return f


STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100.0, "dur": 90.0}
KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 110.0, "dur": 50.0,
          "args": {"device": 0, "stream": 7, "correlation": 1}}


@pytest.mark.parametrize("events,words", [
    ([STEP, dict(KERNEL, args={"device": 2**40, "stream": 7, "correlation": 1})], "cannot be int32"),
    ([STEP, dict(STEP, name="ProfilerStep#2", ts=50.0, dur=10.0), KERNEL], "the clock went backwards (from ts + dur of its step spans)"),
])
def test_a_problem_found_after_conversion_names_the_trace_not_the_derived_table(tmp_path, capsys, events, words):
    f = _kineto(tmp_path, events)
    assert cli.main(["import", "kineto", str(f), "--incident", "t", "--incidents-dir", str(tmp_path / "inc")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {f}: ") and words in err[0], err
    assert "tables/" not in err[0] and not (tmp_path / "inc" / "t").exists()


def test_a_flight_recorder_offset_overflow_names_the_dump_and_the_offset(tmp_path, capsys):
    inc = CG.good_incident(tmp_path / "inc" / "x")
    m = CG.read_manifest(inc)
    m.update(incident_id="x", clock={"host": "monotonic", "unix_minus_host_ns": -(2**62)})
    CG.write_manifest(inc, m)
    dump = tmp_path / "nccl_trace_rank_0.pkl"
    dump.write_bytes(pickle.dumps(_fr(time_created_ns=2**62 + 1)))
    assert cli.main(["import", "torch-fr", str(dump), "--incident", "x", "--incidents-dir", str(tmp_path / "inc")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {dump}: entries' time_created_ns minus the incident's "
                                               f"clock.unix_minus_host_ns {-(2**62)}"), err


# ---------------------------------------------------------------- warnings from numeric code

def test_numeric_warnings_are_raised_as_one_error_naming_the_input():
    def cast(x):
        return np.asarray([x]).astype(np.int64)

    with pytest.raises(InputError) as exc:
        numeric_warnings.call(cast, "trace.json", math.nan)
    assert exc.value.where == "trace.json" and "invalid value encountered in cast" in exc.value.problem
    assert numeric_warnings.call(cast, "trace.json", 3.0).tolist() == [3]


def test_a_nan_nvml_sample_is_an_error_line_not_a_stray_runtime_warning(tmp_path):
    n = 6
    nv = pa.table({"device": pa.array([0] * n, pa.int32()), "ts_ns": [1_000_000 + i * 1_000_000 for i in range(n)],
                   "metric": ["clock_event_reasons"] * n, "value": [math.nan] * n, "source": ["nvml"] * n,
                   "rank": pa.nulls(n, pa.int32())})
    inc = CG.good_incident(tmp_path / "inc", {"steps": CG._steps(), "kernels": CG._kernels(), "nvml": nv})
    m = CG.read_manifest(inc)
    m["sources"]["nvml"] = {"status": "observed", "reason": None}
    CG.write_manifest(inc, m)
    rc, err, _ = cli_child(["diagnose", str(inc), "-o", str(tmp_path / "d.json")], tmp_path)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {inc}: holds values the numeric code cannot use (invalid value encountered in cast)")
    assert not (tmp_path / "d.json").exists()


# ---------------------------------------------------------------- errors that stayed in a rule log

def _smk(workdir: Path, *config: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
                           "--cores", "1", "--configfile", str(ROOT / "config" / "config.yaml"), "--config", *config,
                           "--until", "plan"], cwd=workdir, capture_output=True, text=True, timeout=300, env=ENV)


@pytest.mark.slow
def test_refused_candidates_print_the_stallcase_error_on_the_terminal(tmp_path):
    from program_factory import make_program, record

    repo = make_program(tmp_path)
    record(repo, tmp_path / "incidents", "--steps", "3", incident="tx")
    os.mkfifo(tmp_path / "fifo.patch")
    (tmp_path / "link.patch").write_text(textwrap.dedent("""\
        diff --git a/pkg/link b/pkg/link
        new file mode 120000
        --- /dev/null
        +++ b/pkg/link
        @@ -0,0 +1 @@
        +/etc/passwd
        """))
    cases = [
        (['candidate={git_ref: "--output=/tmp/x"}', f"source_repo={repo}"], "candidate.git_ref: not a git ref: '--output=/tmp/x'"),
        (["candidate={patch: fifo.patch}"], "fifo.patch: candidate patch file not found (or not a regular file)"),
        (["candidate={patch: link.patch}"], "link.patch: the patch creates or changes a symlink (mode 120000): refused"),
    ]
    for config, words in cases:
        r = _smk(tmp_path, "incident=tx", *config)
        out = r.stdout + r.stderr
        assert r.returncode != 0
        lines = [ln for ln in out.splitlines() if ln.startswith("stallcase: error: ")]
        assert len(lines) == 1 and words in lines[0], out[-3000:]


def test_a_design_that_cannot_conclude_stops_snakemake_in_one_line(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("trials:\n  blocks: 5\n")
    r = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                        "--cores", "1", "--configfile", str(ROOT / "config" / "config.yaml"), str(mine), "-n"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=ENV)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert [ln for ln in lines if ln.startswith("error:")] == [
        "error: config trials.blocks: is 5: at confidence 0.95 no interval exists below 6 blocks, so the comparison "
        "could never conclude; use blocks >= 6"], lines


def test_rulelog_keeps_an_os_error_and_a_numeric_warning_as_error_lines(tmp_path):
    """The terminal's summary reads `error:` lines from rule logs: an OSError (a full disk, a
    permission) and a numeric warning in a stage must leave one there too, naming the file."""
    from workflow_lib.core import rulelog

    def unreadable(path):
        return open(path, encoding="utf-8").read()

    log = tmp_path / "a.log"
    with pytest.raises(OSError):
        rulelog.logged(log, unreadable, str(tmp_path / "missing.json"))
    assert log.read_text().splitlines() == [f"error: {tmp_path / 'missing.json'}: No such file or directory"]

    def cast(path):
        return np.asarray([math.nan]).astype(np.int64)

    log2 = tmp_path / "b.log"
    with pytest.raises(InputError):
        rulelog.logged(log2, cast, "snapshot.json")
    assert log2.read_text().startswith("error: snapshot.json: holds values the numeric code cannot use (invalid value encountered in cast)")
