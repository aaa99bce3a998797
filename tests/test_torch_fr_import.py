"""`stallcase import torch-fr`: flight-recorder dumps (pickle and JSON) -> the collectives table."""

from __future__ import annotations

import json
import os
import pickle

import pyarrow as pa
import pytest

from benchmarks.fr_builders import MS, T0_NS, dump, entry, job, write_dumps
from workflow_lib import cli
from workflow_lib.core.errors import InputError
from workflow_lib.importers.torch_fr import import_torch_fr
from workflow_lib.core.incident import read_incident, source, write_incident


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_import_two_ranks(tmp_path, fmt):
    j = job(n_steps=4, late={2: (1, 30 * MS)})
    files = write_dumps(tmp_path / "dumps", j.dumps, fmt=fmt)
    out = import_torch_fr(files, incident_id="fr1", incidents_dir=tmp_path / "inc")
    inc = read_incident(out)
    assert inc.manifest["clock"]["host"] == "realtime"
    assert inc.manifest["ranks"] == [0, 1]
    assert inc.observed("torch_fr") and inc.observed("collective_gpu_duration")
    t = inc.table("collectives").to_pandas().sort_values(["rank", "seq_id"])
    assert len(t) == 8 and set(t["rank"]) == {0, 1}
    r0 = t[(t["rank"] == 0) & (t["seq_id"] == 3)].iloc[0]
    assert r0["op_type"] == "all_reduce" and r0["pg_id"] == "0" and r0["pg_name"] == "default_pg"
    assert json.loads(r0["group_ranks"]) == [0, 1] and r0["group_size"] == 2
    assert json.loads(r0["input_sizes"]) == [[1024]]
    assert json.loads(r0["dtypes"]) == {"input": ["Float"], "output": ["Float"]}
    # rank 0 waited 30 ms for rank 1 at step 2 (seq 3): its GPU duration says so
    assert abs(r0["gpu_duration_ns"] - 30 * MS) < 1 * MS
    assert r0["enqueue_ns"] == j.dumps[0]["entries"][2]["time_created_ns"]
    assert t["gpu_start_ns"].isna().all()  # discovery times are watchdog polls, not GPU times
    assert inc.manifest["sources"]["torch_fr"]["detail"]["dumps"]["1"]["wrapped"] is False


def test_rank_from_dump_key_and_conflict(tmp_path):
    d = dump([entry(0, 1, T0_NS)], rank=3)
    p = tmp_path / "whatever.pkl"
    p.write_bytes(pickle.dumps(d))
    out = import_torch_fr([p], incident_id="k", incidents_dir=tmp_path / "inc")
    assert read_incident(out).manifest["ranks"] == [3]
    q = tmp_path / "dump_rank5.pkl"
    q.write_bytes(pickle.dumps(d))
    with pytest.raises(InputError, match="says rank 3 but the file name says rank 5"):
        import_torch_fr([q], incident_id="k2", incidents_dir=tmp_path / "inc")


def test_no_rank_anywhere(tmp_path):
    p = tmp_path / "dump.pkl"
    p.write_bytes(pickle.dumps(dump([entry(0, 1, T0_NS)])))
    with pytest.raises(InputError, match="cannot tell the rank"):
        import_torch_fr([p], incident_id="k", incidents_dir=tmp_path / "inc")


def test_duplicate_rank(tmp_path):
    files = write_dumps(tmp_path / "a", {0: dump([entry(0, 1, T0_NS)])})
    files += write_dumps(tmp_path / "b", {0: dump([entry(0, 1, T0_NS)])})
    with pytest.raises(InputError, match="second dump for rank 0"):
        import_torch_fr(files, incident_id="k", incidents_dir=tmp_path / "inc")


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_nothing_written(tmp_path):
    marker = tmp_path / "pwned"
    d = dump([entry(0, 1, T0_NS)])
    d["entries"][0]["frames"] = [_Evil(marker)]
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps(d))
    with pytest.raises(InputError) as err:
        import_torch_fr([p], incident_id="evil", incidents_dir=tmp_path / "inc")
    assert str(p) in err.value.oneline() and "refused" in err.value.oneline()
    assert not marker.exists()
    assert not (tmp_path / "inc" / "evil" / "manifest.json").exists()


@pytest.mark.parametrize("mutate,problem", [
    (lambda e: e.pop("collective_seq_id"), "entry 0 lacks collective_seq_id"),
    (lambda e: e.update(process_group="0"), "process_group"),
    (lambda e: e.update(time_created_ns=-5), "time_created_ns"),
    (lambda e: e.update(profiling_name="all_reduce"), "profiling_name"),
    (lambda e: e.update(input_sizes=[["a"]]), "input_sizes"),
    (lambda e: e.update(duration_ms=float("nan")), "duration_ms"),
])
def test_malformed_entries(tmp_path, mutate, problem):
    e = entry(0, 1, T0_NS, duration_ms=1.0)
    mutate(e)
    files = write_dumps(tmp_path, {0: dump([e])})
    with pytest.raises(InputError, match=problem) as err:
        import_torch_fr(files, incident_id="bad", incidents_dir=tmp_path / "inc")
    assert err.value.where == str(files[0])


def test_older_dump_without_output_sizes(tmp_path):
    e = entry(0, 1, T0_NS)
    del e["output_sizes"], e["output_dtypes"]
    inc = read_incident(import_torch_fr(write_dumps(tmp_path, {0: dump([e])}), incident_id="old", incidents_dir=tmp_path / "inc"))
    row = inc.table("collectives").to_pylist()[0]
    assert row["output_sizes"] is None and json.loads(row["dtypes"]) == {"input": ["Float"], "output": []}


def test_not_a_dump(tmp_path):
    p = tmp_path / "x_rank0.json"
    p.write_text(json.dumps({"hello": 1}))
    with pytest.raises(InputError, match="no 'version' key"):
        import_torch_fr([p], incident_id="bad", incidents_dir=tmp_path / "inc")
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        import_torch_fr([p], incident_id="bad", incidents_dir=tmp_path / "inc")


def test_merge_into_monotonic_incident_keeps_tables_and_shifts_times(tmp_path):
    inc_dir = tmp_path / "inc" / "m1"
    unix_minus_host = T0_NS - 5_000 * MS
    steps = pa.table({"step_id": [0], "thread_id": [1], "start_ns": [5_000 * MS], "end_ns": [5_100 * MS], "rank": pa.array([0], pa.int32())})
    write_incident(inc_dir, {"incident_id": "m1", "reason": "manual", "producer": "recorder",
                             "clock": {"host": "monotonic", "unix_minus_host_ns": unix_minus_host},
                             "sources": {"steps": source("observed")}, "ranks": [0]}, {"steps": steps})
    files = write_dumps(tmp_path / "d", {0: dump([entry(0, 1, T0_NS + 1 * MS)])})
    import_torch_fr(files, incident_id="m1", incidents_dir=tmp_path / "inc")
    inc = read_incident(inc_dir)
    assert inc.manifest["producer"] == "recorder" and inc.observed("steps") and inc.observed("torch_fr")
    assert inc.table("steps").num_rows == 1
    assert inc.table("collectives")["enqueue_ns"].to_pylist() == [5_001 * MS]
    # a second rank merges beside the first; re-importing rank 0 replaces its rows
    files = write_dumps(tmp_path / "d2", {1: dump([entry(0, 1, T0_NS + 2 * MS)]), 0: dump([entry(0, 1, T0_NS + 3 * MS)])})
    import_torch_fr(files, incident_id="m1", incidents_dir=tmp_path / "inc")
    t = read_incident(inc_dir).table("collectives").to_pandas().sort_values("rank")
    assert t["enqueue_ns"].tolist() == [5_003 * MS, 5_002 * MS]


def test_monotonic_incident_without_offset_is_refused(tmp_path):
    inc_dir = tmp_path / "inc" / "m2"
    write_incident(inc_dir, {"incident_id": "m2", "reason": "manual", "clock": {"host": "monotonic"}, "sources": {}}, {})
    files = write_dumps(tmp_path / "d", {0: dump([entry(0, 1, T0_NS)])})
    with pytest.raises(InputError, match="cannot be placed"):
        import_torch_fr(files, incident_id="m2", incidents_dir=tmp_path / "inc")


def test_cli_import_torch_fr(tmp_path, capsys):
    files = write_dumps(tmp_path / "d", job(n_steps=2).dumps)
    rc = cli.main(["import", "torch-fr", *map(str, files), "--incident", "c1", "--incidents-dir", str(tmp_path / "inc")])
    assert rc == 0 and "wrote" in capsys.readouterr().out
    bad = tmp_path / "nccl_trace_rank_9"
    bad.write_bytes(b"cos\nsystem\n(S'true'\ntR.")
    rc = cli.main(["import", "torch-fr", str(bad), "--incident", "c2", "--incidents-dir", str(tmp_path / "inc")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "refused" in err and err.count("\n") == 1


def test_without_timing_duration_not_observed(tmp_path):
    files = write_dumps(tmp_path / "d", job(n_steps=2, with_duration=False).dumps)
    inc = read_incident(import_torch_fr(files, incident_id="nt", incidents_dir=tmp_path / "inc"))
    assert not inc.observed("collective_gpu_duration")
    assert "TORCH_NCCL_ENABLE_TIMING" in inc.manifest["sources"]["collective_gpu_duration"]["reason"]
