"""Bounded resources (issue 17): caps on what one input may expand to, linear-time patterns,
and peak RSS of the worst amplifier of each family measured in a subprocess."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workflow_lib.core import bounds, patterns
from workflow_lib.core import config
from workflow_lib.core.config import check_file as check_config_file
from workflow_lib.core.errors import InputError, StallcaseError
from workflow_lib.core.safe_pickle import loads_restricted

ROOT = Path(__file__).resolve().parent.parent
MAX_RSS = 2 << 30


def check_config(partial: dict) -> None:
    """The whole config check on `partial` merged over the workflow's defaults (as Snakemake merges it)."""
    config.check(config.merge(config.load([], []), partial))


def laughs(kind: str, levels: int = 9) -> str:
    lines = ['a0: &a0 {x: 1, y: 2}' if kind == "dict" else 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        if kind == "dict":
            lines.append(f"a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(9)) + "}")
        else:
            lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"trials: *a{levels - 1}" if kind == "dict" else f"demo: {{args: *a{levels - 1}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_yaml_billion_laughs_refused_on_the_node_graph(tmp_path, kind):
    f = tmp_path / "laughs.yaml"
    f.write_text(laughs(kind))
    t0 = time.monotonic()
    with pytest.raises(InputError, match="through YAML aliases"):
        check_config_file(f)
    assert time.monotonic() - t0 < 10


def test_list_alias_expansion_that_reaches_the_workflow_is_refused():
    import yaml
    config = yaml.safe_load(laughs("list"))  # what snakemake hands the workflow: shared lists
    with pytest.raises(StallcaseError, match="expands to more than"):
        check_config(config)


def test_binary_configfile_refused(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InputError, match="not UTF-8"):
        check_config_file(f)


def test_pickle_memo_string_amplification_refused():
    s = "x" * (1 << 20)
    data = pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [s] * 1000}, protocol=4)
    assert len(data) < 2 << 20  # one copy on disk, a GiB once expanded
    with pytest.raises(InputError, match="bytes of text"):
        loads_restricted(data, "m.pkl")


def test_pickle_memo_list_amplification_refused():
    a: list = [1]
    for _ in range(40):
        a = [a, a]
    with pytest.raises(InputError, match="expands to more than"):
        loads_restricted(pickle.dumps({"version": "2.4", "entries": a}, protocol=4), "m.pkl")


def rle_parquet(path: Path, rows: int) -> None:
    """A steps table of `rows` identical rows, written in row groups (small on disk, RLE)."""
    chunk = 1_000_000
    t = pa.table({"step_id": pa.array([0] * chunk, pa.int64()), "thread_id": pa.array([1] * chunk, pa.int64()),
                  "start_ns": pa.array([5] * chunk, pa.int64()), "end_ns": pa.array([6] * chunk, pa.int64())})
    with pq.ParquetWriter(path, t.schema, compression="zstd") as w:
        for _ in range(rows // chunk):
            w.write_table(t)


def test_rle_parquet_of_30m_rows_refused_from_its_footer(tmp_path):
    from workflow_lib.core.tables import read_table
    f = tmp_path / "steps.parquet"
    rle_parquet(f, 30_000_000)
    assert f.stat().st_size < 1 << 20
    with pytest.raises(InputError, match="rows, over the limit"):
        read_table(f, "steps")


def test_gzip_bomb_refused_at_the_decompressed_cap(tmp_path, monkeypatch):
    import gzip

    from workflow_lib.importers.kineto import import_kineto
    monkeypatch.setattr(bounds, "MAX_TRACE_BYTES", 8 << 20)  # the real cap is 4 GiB: same code path, less waiting
    f = tmp_path / "t.json.gz"
    f.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (16 << 20) + b"]}"))
    with pytest.raises(InputError, match="once decompressed"):
        import_kineto([f], incident_id="x", incidents_dir=tmp_path / "incs")


def test_kept_events_cap(tmp_path, monkeypatch):
    from workflow_lib.importers.kineto import import_kineto
    monkeypatch.setattr(bounds, "MAX_TRACE_EVENTS", 50)
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0 + i, "dur": 0.5} for i in range(100)]
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"traceEvents": ev}))
    with pytest.raises(InputError, match="kept events"):
        import_kineto([f], incident_id="x", incidents_dir=tmp_path / "incs")


EVIL = [r"^(a+)+$", r"(a|aa)+$", r"^(\w+\s?)*$", r"(x+x+)+y"]


@pytest.mark.parametrize("pattern", EVIL)
def test_catastrophic_patterns_run_in_linear_time_on_re2(pattern):
    rx = patterns.compile_pattern(pattern, "--step-pattern")
    t0 = time.monotonic()
    rx.search("a" * 50_000 + "!")
    assert time.monotonic() - t0 < 2.0
    assert patterns.engine() == "re2"


@pytest.mark.parametrize("pattern", EVIL + [r"(a)\1"])
def test_without_re2_catastrophic_patterns_are_refused(monkeypatch, pattern):
    monkeypatch.setattr(patterns, "_re2", None)
    with pytest.raises(InputError, match="backtracking|backreference"):
        patterns.compile_pattern(pattern, "--step-pattern")


def test_without_re2_ordinary_patterns_still_work(monkeypatch):
    monkeypatch.setattr(patterns, "_re2", None)
    rx = patterns.compile_pattern(r"step (?P<step>\d+) took (?P<ms>[\d.]+) ms", "--step-pattern")
    assert rx.search("step 3 took 1.5 ms").group("ms") == "1.5"
    assert rx.search("step ² took 1 ms") is None  # ASCII digits only on both engines


def test_re2_errors_are_one_line_and_silent(capfd):
    with pytest.raises(InputError, match="--wait-span"):
        patterns.compile_pattern(r"(a)\1", "--wait-span")
    assert capfd.readouterr().err == ""  # re2 logs to stderr unless told not to


def test_peak_rss_of_the_worst_amplifiers_stays_under_2_gib(tmp_path):
    """Each family's worst amplifier in one child process; its own high-water mark (VmHWM, read
    by the child at its end) is the largest of them. Not RUSAGE_CHILDREN: that is the largest of
    every child the test session waited for, and a child started by fork or vfork starts from the
    session's own size (a million-step report test leaves pytest at ~2.7 GB)."""
    (tmp_path / "laughs.yaml").write_text(laughs("dict"))
    rle_parquet(tmp_path / "steps.parquet", 30_000_000)
    with open(tmp_path / "dump_rank0.pkl", "wb") as fh:  # sparse, over the 64 MiB dump cap
        fh.truncate(256 << 20)
    s = "x" * (1 << 20)
    (tmp_path / "memo.pkl").write_bytes(pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [s] * 2000}, protocol=4))
    code = """
import sys
from workflow_lib.cli import main
runs = [["check-config", "laughs.yaml"], ["import", "torch-fr", "dump_rank0.pkl", "--incident", "a", "--incidents-dir", "i"],
        ["import", "torch-fr", "memo.pkl", "--incident", "b", "--incidents-dir", "i"]]
for argv in runs:
    assert main(argv) == 2, argv
from workflow_lib.core.tables import read_table
from workflow_lib.core.errors import InputError
try:
    read_table("steps.parquet", "steps")
    raise SystemExit("accepted")
except InputError:
    pass
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0].split()[1]
print("ok", hwm)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = proc.stdout.strip().splitlines()[-1].split() if proc.stdout.strip() else []
    assert proc.returncode == 0 and last[:1] == ["ok"], proc.stdout + proc.stderr
    peak = int(last[1]) * 1024  # kB
    assert peak > 0
    assert peak < MAX_RSS, f"peak RSS {peak >> 20} MiB"
