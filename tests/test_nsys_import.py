"""`stallcase import nsys`: Nsight Systems SQLite exports, diagnosed like a Kineto trace.

Real exports by others (tests/fixtures/nsys, PROVENANCE.md there): an MPI + CUDA saxpy written
by nsys 2022.2 (EXPORT_META_DATA, no ENUM_* tables, NVTX names in text and textId, backtrace
rows repeating each CUDA call) and a CloverLeaf run exported by nsys 2024.5 (META_DATA_EXPORT,
ENUM_* tables, CUDA synchronization records, no NVTX table), trimmed to its first 400 kernels.
Known truth: the committed H200 CUPTI captures with injected causes (tests/fixtures/capture),
converted to the nsys schema in the test (benchmarks/nsys_export.py, synthetic: no machine here
can write a real nsys report), must diagnose the injected cause on exactly the injected steps,
and the same as the recorder's own form of the incident, step by step.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

from benchmarks.nsys_export import write_export
from workflow_lib import cli
from workflow_lib.core.incident import read_incident, write_incident
from workflow_lib.diagnose import diagnose_dir
from workflow_lib.importers.kineto import import_kineto
from workflow_lib.importers.nsys import import_nsys
from workflow_lib.importers.torch_fr import import_torch_fr

FIX = Path(__file__).parent / "fixtures"
SAXPY = FIX / "nsys" / "saxpy-mpi-cuda_nsys.sqlite"
CLOVER = FIX / "nsys" / "cloverleaf-cuda_nsys2024.5_trimmed.sqlite"
CAPTURE = FIX / "capture"
MS = 1_000_000


def _attributed(d) -> set[tuple[int, str]]:
    return {(s["step_id"], f["check"]) for s in d["steps"] for f in s["findings"] if f["verdict"] == "attributed"}


def _import(tmp_path, *files, name="n", **kw):
    return read_incident(import_nsys(list(files), incident_id=name, incidents_dir=tmp_path / "inc", **kw))


# ---- the public exports --------------------------------------------------------------------

def test_the_saxpy_export_of_nsys_2022_2_imports_and_diagnoses(tmp_path):
    inc = _import(tmp_path, SAXPY)
    t, m = inc.tables, inc.manifest
    assert (t["kernels"].num_rows, t["memcpy"].num_rows) == (5, 15)
    assert set(t["kernels"]["name"].to_pylist()) == {"saxpy(double *, double *, double *, double, int)"}
    # cudaMemcpy of pageable buffers: synchronous copies both ways, memory kinds from the numeric codes
    assert set(zip(t["memcpy"]["kind"].to_pylist(), t["memcpy"]["src_kind"].to_pylist(), t["memcpy"]["dst_kind"].to_pylist())) == {
        ("HtoD", "pageable", "device"), ("DtoH", "device", "pageable")}
    assert t["memcpy"]["is_async"].to_pylist() == [False] * 15
    # 95 rows, 38 of them backtrace repeats (eventClass 67) of a call listed once as itself
    r = t["runtime_api"]
    assert r.num_rows == 57 and len(set(r["correlation_id"].to_pylist())) == 57
    assert pc.sum(r["is_sync"]).as_py() == 15 + 3  # one cudaMemcpy per copy, and cudaFree x3
    assert {"MPI_Send", "MPI_Recv", "saxpy"} <= set(t["spans"]["name"].to_pylist())
    assert m["ranks"] == [0]
    prov = m["provenance"]["nsys"][0]
    assert prov["processes"][0]["rank_from"] == "ThreadNames: MPI Rank N" and prov["processes"][0]["pid"] == 1230493
    assert (prov["nsys_version"], prov["metadata_table"]) == ("2022.2.1.31", "EXPORT_META_DATA")
    assert prov["gpus"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert m["clock"] == {"host": "realtime", "unix_minus_host_ns": 0}
    assert m["window"]["start_ns"] > prov["session_start_utc_ns"]  # ns since the session start, on Unix time
    assert t["sched"].num_rows == 3238 and set(t["sched"]["state"].to_pylist()) <= {"R", "off_cpu"}
    d = diagnose_dir(inc.path)
    by = {f["check"]: f for f in d["steps"][0]["findings"]}
    # five 262 MB pageable copies each way, every one a blocking cudaMemcpy: the transfer cause
    assert by["transfer_stall"]["verdict"] == "attributed" and by["transfer_stall"]["explains_ns"] > 300 * MS


def test_the_cloverleaf_export_of_nsys_2024_5_imports_and_diagnoses(tmp_path):
    inc = _import(tmp_path, CLOVER)
    t, m = inc.tables, inc.manifest
    prov = m["provenance"]["nsys"][0]
    assert (prov["nsys_version"], prov["metadata_table"]) == ("2024.5.1.113", "META_DATA_EXPORT")
    assert t["kernels"].num_rows == 400
    r = t["runtime_api"]
    names = r["name"].to_pylist()
    # CUDA synchronization records, each on the thread of the call with its correlation id
    sync = r.filter(pc.starts_with(r["name"], "cuda_sync:"))
    assert sync.num_rows == 401 and set(sync["thread_id"].to_pylist()) == {1701896}
    assert names.count("cudaDeviceSynchronize") == 401
    assert set(t["memcpy"]["kind"].to_pylist()) == {"HtoD", "DtoH"}  # through ENUM_CUDA_MEMCPY_OPER
    assert m["sources"]["steps"]["detail"]["basis"].startswith("no step annotations")  # no NVTX_EVENTS table
    d = diagnose_dir(inc.path)
    assert (0, "sync_stall") in _attributed(d)


# ---- schema drift: one test per difference -------------------------------------------------

@pytest.fixture(scope="module")
def blocking_sync():
    return read_incident(CAPTURE / "blocking-sync")


def _both(tmp_path, inc):
    out = {}
    for v in ("2022.2", "2024.5"):
        f = write_export(tmp_path / f"{v}.sqlite", inc.tables, v)
        out[v] = _import(tmp_path, f, name=f"v{v.replace('.', '')}")
    return out


def test_both_metadata_tables_are_read(tmp_path, blocking_sync):
    got = _both(tmp_path, blocking_sync)
    assert {v: i.manifest["provenance"]["nsys"][0]["metadata_table"] for v, i in got.items()} == {
        "2022.2": "EXPORT_META_DATA", "2024.5": "META_DATA_EXPORT"}


def test_tables_are_the_same_with_or_without_enum_tables_and_whichever_nvtx_column(tmp_path, blocking_sync):
    got = _both(tmp_path, blocking_sync)
    a, b = got["2022.2"].tables, got["2024.5"].tables
    for name in ("kernels", "memcpy", "runtime_api", "spans", "steps"):
        assert a[name].equals(b[name]), name
    src = blocking_sync.tables
    spans = [n for n in a["spans"]["name"].to_pylist() if not n.startswith("ProfilerStep#")]  # the steps' ranges aside
    assert sorted(spans) == sorted(src["spans"]["name"].to_pylist())  # text (2022.2) and textId (2024.5)
    assert sorted(a["memcpy"]["kind"].to_pylist()) == sorted(src["memcpy"]["kind"].to_pylist())
    # 2022.2's backtrace repeats are not read: one row per call
    assert a["runtime_api"].num_rows == src["runtime_api"].num_rows


def test_an_enum_table_is_read_not_assumed(tmp_path, blocking_sync):
    f = write_export(tmp_path / "x.sqlite", blocking_sync.tables, "2024.5")
    with sqlite3.connect(f) as db:  # the file says code 1 is device-to-host: believe the file
        db.execute("UPDATE ENUM_CUDA_MEMCPY_OPER SET name = 'CUDA_MEMCPY_KIND_DTOH' WHERE id = 1")
    kinds = _import(tmp_path, f).tables["memcpy"]["kind"].to_pylist()
    assert "HtoD" not in kinds and kinds.count("DtoH") == blocking_sync.tables["memcpy"]["kind"].to_pylist().count("HtoD") + \
        blocking_sync.tables["memcpy"]["kind"].to_pylist().count("DtoH")


# ---- known truth and the same incident in two forms ------------------------------------------

@pytest.mark.parametrize("name,check,version", [("blocking-sync", "sync_stall", "2024.5"),
                                                ("starved-queue", "input_starvation", "2022.2")])
def test_an_h200_capture_converted_to_nsys_diagnoses_its_injected_cause(tmp_path, name, check, version):
    import json

    truth = json.loads((CAPTURE / name / "truth.json").read_text())
    inc = read_incident(CAPTURE / name)
    d = diagnose_dir(_import(tmp_path, write_export(tmp_path / "x.sqlite", inc.tables, version)).path)
    inj = set(truth["injected_steps"])
    if check == "input_starvation":
        # as tests/test_diagnose_h200_fixtures.py scores the recorder's form: >= 1 ms explained
        assert {s["step_id"] for s in d["steps"] for f in s["findings"]
                if f["check"] == check and f["verdict"] == "attributed" and f["explains_ns"] >= MS} == inj
    else:  # every step ends in one .item(); the injected ones are the top syncs
        by = {s["step_id"]: next(f for f in s["findings"] if f["check"] == check) for s in d["steps"]}
        assert set(sorted(by, key=lambda i: -by[i]["explains_ns"])[: len(inj)]) == inj
        assert all(by[i]["verdict"] == "attributed" for i in inj)


@pytest.mark.parametrize("name,version", [("blocking-sync", "2022.2"), ("starved-queue", "2024.5"), ("host-gap", "2024.5")])
def test_the_same_incident_from_nsys_and_from_the_recorder_diagnoses_the_same(tmp_path, name, version):
    inc = read_incident(CAPTURE / name)
    nsys = diagnose_dir(_import(tmp_path, write_export(tmp_path / "x.sqlite", inc.tables, version)).path)
    # The recorder's form without what an nsys export cannot hold (NVML, /proc scheduler
    # samples), so both forms carry the same evidence. Its clock calibration stays: nsys puts
    # GPU times on the CPU's timebase itself, the recorder measures the mapping.
    man = {k: v for k, v in inc.manifest.items() if k != "tables"}
    gone = ("sched", "nvml")
    man["sources"] = {**man["sources"], **{s: {"status": "not_observed", "reason": "not in an nsys export", "detail": {}} for s in gone}}
    write_incident(tmp_path / "rec", man, {k: v for k, v in inc.tables.items() if k not in gone})
    rec = diagnose_dir(tmp_path / "rec")
    assert [s["step_id"] for s in nsys["steps"]] == [s["step_id"] for s in rec["steps"]]
    assert _attributed(nsys) == _attributed(rec) and len(_attributed(rec)) > 100


def test_a_two_rank_nccl_job_from_nsys_and_from_kineto_diagnoses_the_same(tmp_path):
    """The 2xH200 job with injected late arrivals (tests/fixtures/h200x2_collectives): its Kineto
    traces imported, each rank's tables written as that rank's nsys export, both forms given the
    job's NCCL flight-recorder dumps: the same collective waits, and the same everything else."""
    x2 = FIX / "h200x2_collectives"
    kin = read_incident(import_kineto(sorted(x2.glob("kineto_rank_*.json.gz")), incident_id="k", incidents_dir=tmp_path))
    files = [write_export(tmp_path / f"r{r}.sqlite", {n: t.filter(pc.equal(t["rank"], r)) for n, t in kin.tables.items()
                                                      if "rank" in t.column_names}, v) for r, v in ((0, "2022.2"), (1, "2024.5"))]
    import_nsys(files, incident_id="n", incidents_dir=tmp_path)
    for inc in ("k", "n"):
        import_torch_fr(sorted(x2.glob("nccl_trace_rank_*")), incident_id=inc, incidents_dir=tmp_path)
    dk, dn = diagnose_dir(tmp_path / "k"), diagnose_dir(tmp_path / "n")

    def attributed(d):
        return {(s["rank"], s["step_id"], f["check"], f["explains_ns"]) for s in d["steps"] for f in s["findings"] if f["verdict"] == "attributed"}

    assert attributed(dn) == attributed(dk)
    assert any(c == "collective_wait" for _, _, c, _ in attributed(dn))


# ---- bad input: one line naming the file and the table/column, nothing written --------------

def _refused(tmp_path, capsys, f, words):
    assert cli.main(["import", "nsys", str(f), "--incident", "t", "--incidents-dir", str(tmp_path / "inc")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {f}") and words in err[0], err
    assert not (tmp_path / "inc").exists()


def _db(tmp_path, sql):
    f = tmp_path / "bad.sqlite"
    with sqlite3.connect(f) as db:
        db.executescript(sql)
    return f


def test_a_file_without_a_kernel_table_is_refused_naming_it(tmp_path, capsys):
    _refused(tmp_path, capsys, _db(tmp_path, "CREATE TABLE StringIds (id INTEGER, value TEXT);"), "no CUPTI_ACTIVITY_KIND_KERNEL table")


def test_a_view_named_like_the_kernel_table_is_not_read(tmp_path, capsys):
    f = _db(tmp_path, "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                      "SELECT x AS start, x AS end FROM c;")
    _refused(tmp_path, capsys, f, "no CUPTI_ACTIVITY_KIND_KERNEL table")


def test_a_view_named_like_an_optional_table_is_not_read(tmp_path, blocking_sync):
    f = write_export(tmp_path / "x.sqlite", blocking_sync.tables, "2024.5")
    with sqlite3.connect(f) as db:  # rows without end, if it were read
        db.executescript("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; CREATE VIEW CUPTI_ACTIVITY_KIND_RUNTIME AS WITH RECURSIVE "
                         "c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS start, x AS end FROM c;")
    inc = _import(tmp_path, f)
    assert inc.tables["runtime_api"].filter(pc.invert(pc.starts_with(inc.tables["runtime_api"]["name"], "cuda_sync:"))).num_rows == 0
    assert inc.tables["kernels"].num_rows == blocking_sync.tables["kernels"].num_rows


def test_a_file_that_is_not_sqlite_is_refused(tmp_path, capsys):
    f = tmp_path / "x.sqlite"
    f.write_bytes(b"not a database" * 100)
    _refused(tmp_path, capsys, f, "not an SQLite database")


@pytest.mark.parametrize("update,words", [
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 3", "CUPTI_ACTIVITY_KIND_KERNEL.start: 1 value(s) that are not an integer, e.g. 'soon'"),
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 0.5 WHERE rowid = 3", "CUPTI_ACTIVITY_KIND_KERNEL.end: 1 value(s) that are not an integer"),
    ("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = start - 5 WHERE rowid = 2", "CUPTI_ACTIVITY_KIND_MEMCPY.end: 1 row(s) end before they start"),
    ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = -1 WHERE rowid = 1", "CUPTI_ACTIVITY_KIND_RUNTIME.start: a time outside"),
    ("DELETE FROM StringIds WHERE id = (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)",
     "CUPTI_ACTIVITY_KIND_KERNEL.demangledName"),
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 1 << 40 WHERE rowid = 1", "CUPTI_ACTIVITY_KIND_KERNEL.deviceId"),
])
def test_a_bad_value_names_the_table_and_column(tmp_path, capsys, blocking_sync, update, words):
    f = write_export(tmp_path / "x.sqlite", blocking_sync.tables, "2024.5")
    with sqlite3.connect(f) as db:
        db.execute(update)
    _refused(tmp_path, capsys, f, words)


def test_a_report_without_nsys_on_the_path_says_how_to_export_it(tmp_path, capsys, monkeypatch):
    f = tmp_path / "run.nsys-rep"
    f.write_bytes(b"\0" * 64)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    _refused(tmp_path, capsys, f, "nsys export --type sqlite")


def test_a_report_is_exported_by_the_nsys_on_the_path(tmp_path, monkeypatch):
    # nsys itself cannot run here: a stand-in on the PATH does what `nsys export` does with its argv.
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    fake = bin_ / "nsys"
    fake.write_text(f"#!/bin/sh\n# argv: export --type sqlite --force-overwrite true --output OUT REPORT\n"
                    f'[ "$1 $2 $3" = "export --type sqlite" ] || exit 3\ncp "{CLOVER}" "$7"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    rep = tmp_path / "clover.nsys-rep"
    rep.write_bytes(b"report")
    inc = _import(tmp_path, rep)
    assert inc.tables["kernels"].num_rows == 400
    assert inc.manifest["artifacts"][0]["path"] == str(rep.resolve())


def test_the_import_takes_the_workload_command(tmp_path, capsys):
    assert cli.main(["import", "nsys", str(SAXPY), "--incident", "w", "--incidents-dir", str(tmp_path / "inc"),
                     "--workload", "--", sys.executable, "-c", "pass"]) == 0
    assert read_incident(tmp_path / "inc" / "w").manifest["workload"]["argv"][1:] == ["-c", "pass"]


def test_without_incident_the_export_s_name_is_the_id(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["import", "nsys", str(CLOVER)]) == 0
    assert read_incident(tmp_path / "incidents" / "cloverleaf-cuda_nsys2024.5_trimmed").manifest["producer"] == "nsys-import"
    assert cli.main(["import", "kineto", str(CLOVER)]) == 2  # the other formats still need one
    assert "--incident: required for kineto" in capsys.readouterr().err


def test_two_exports_one_per_rank_become_two_ranks(tmp_path, blocking_sync):
    a = write_export(tmp_path / "a.sqlite", blocking_sync.tables, "2024.5")
    b = write_export(tmp_path / "b.sqlite", blocking_sync.tables, "2022.2")
    inc = _import(tmp_path, a, b)
    assert inc.manifest["ranks"] == [0, 1]
    assert [p["processes"][0]["rank_from"] for p in inc.manifest["provenance"]["nsys"]] == ["process order"] * 2
