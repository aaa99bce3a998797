"""Numbers and text at the boundary (issue 17): workflow_lib/core/bounds.py and its callers."""

from __future__ import annotations

import json
import pickle

import pyarrow as pa
import pytest

from workflow_lib.core import bounds
from workflow_lib.core.errors import InputError


@pytest.mark.parametrize("v, ok", [(0, True), (2**63 - 1, True), (2**63, False), (-1, False), (True, False),
                                   (1.0, False), ("1", False), (10**400, False)])
def test_ns(v, ok):
    if ok:
        assert bounds.ns(v, "f", "w") == v
    else:
        with pytest.raises(InputError, match="^w: f "):
            bounds.ns(v, "f", "w")


@pytest.mark.parametrize("v, ok", [(0, True), (2**31 - 1, True), (2**31, False), (2**40, False), (-1, False), (False, False)])
def test_rank_is_int32(v, ok):
    if ok:
        assert bounds.rank(v, "rank", "w") == v
    else:
        with pytest.raises(InputError, match="rank"):
            bounds.rank(v, "rank", "w")


def test_a_400_digit_number_is_shown_short():
    with pytest.raises(InputError) as e:
        bounds.ns(10**400, "base", "w")
    assert "401-digit integer" in str(e.value) and len(str(e.value)) < 200


@pytest.mark.parametrize("s, ok", [("7", True), ("0012", True), ("²", False), ("٣", False), ("1" * 20, False),
                                   ("", False), ("-1", False), ("1\n", False)])
def test_decimal_ids_are_ascii_int64(s, ok):
    if ok:
        assert bounds.decimal_id(s, "step id", "w") == int(s)
    else:
        with pytest.raises(InputError, match="step id"):
            bounds.decimal_id(s, "step id", "w")


@pytest.mark.parametrize("v", ["demo\n", "demo\r\n", "-rf", ".hidden", "a/b", "a..b", "", "x" * 129, "inc\udcff", 5])
def test_identifiers_refused(v):
    with pytest.raises(InputError, match="invalid incident id"):
        bounds.identifier(v, "incident id", "w")


def test_trailing_newline_id_refused_by_check_incident_id():
    from workflow_lib.core.errors import StallcaseError
    from workflow_lib.core.incident import check_incident_id
    with pytest.raises(StallcaseError):
        check_incident_id("demo\n")


def test_text_refuses_lone_surrogates_naming_the_field():
    with pytest.raises(InputError, match="name holds a lone surrogate"):
        bounds.text("a\ud800b", "name", "w")
    with pytest.raises(InputError, match="NUL"):
        bounds.text("a\x00b", "env value", "w")


def test_future_version_names_the_newest_supported():
    with pytest.raises(InputError, match="newest supported: 1"):
        bounds.version(2, "tables_version", "w", 1)
    assert bounds.version(1, "tables_version", "w", 1) == 1


def test_reversed_window_refused_not_swapped():
    with pytest.raises(InputError, match="reversed"):
        bounds.window(10, 5, "window", "w")


def test_same_file_twice_refused(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    (tmp_path / "b.json").symlink_to(f)
    with pytest.raises(InputError, match="same file is given twice"):
        bounds.unique_files([f, tmp_path / "b.json"])


def test_json_numbers_beyond_int64_refused_in_records():
    from workflow_lib.core import records
    from workflow_lib.core.errors import RecordError
    data = json.dumps({"schema_version": 1, "kind": "incident_manifest", "created_unix_ns": 10**30}).encode()
    with pytest.raises(RecordError, match="created_unix_ns is .* outside the int64 range"):
        records.parse_record(data, "incident_manifest", "m.json")


def test_future_record_schema_version_names_the_newest():
    from workflow_lib.core import records
    from workflow_lib.core.errors import RecordError
    with pytest.raises(RecordError, match=r"schema_version 7 is newer .* \(newest supported: 1\)"):
        records.parse_record(b'{"schema_version": 7, "kind": "snapshot"}', "snapshot", "s.json")


def test_expanded_size_counts_shared_containers_without_walking_them():
    a = [1] * 10
    for _ in range(30):  # 10 * 2**30 values if walked
        a = [a, a]
    with pytest.raises(InputError, match="expands to more than"):
        bounds.expanded_size(a, "config", 1000)


# ---- importers: the tracebacks, each now one InputError naming the field

def _ev(**kw):
    e = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100.0, "dur": 90.0}
    e.update(kw)
    return e


@pytest.mark.parametrize("label, text, frag", [
    ("base-401-digits", '{"baseTimeNanoseconds": ' + "1" * 401 + ', "traceEvents": [%s]}' % json.dumps(_ev()), "baseTimeNanoseconds"),
    ("rank-2-31", json.dumps({"distributedInfo": {"rank": 2**31}, "traceEvents": [_ev()]}), "distributedInfo.rank"),
    ("rank-2-40", json.dumps({"distributedInfo": {"rank": 2**40}, "traceEvents": [_ev()]}), "distributedInfo.rank"),
    ("step-2-64", json.dumps({"traceEvents": [_ev(name=f"ProfilerStep#{2**64}")]}), "step id"),
    ("ts-true", json.dumps({"traceEvents": [_ev(ts=True)]}), "boolean"),
    ("tid-2-70", json.dumps({"traceEvents": [_ev(tid=2**70)]}), "tid"),
    ("two-arrays", '{"traceEvents": [%s], "traceEvents": [%s]}' % (json.dumps(_ev()), json.dumps(_ev())), "appears twice"),
    ("text-after-root", json.dumps({"traceEvents": [_ev()]}) + " {}", "text after the JSON object"),
    ("negative-dur", json.dumps({"traceEvents": [_ev(dur=-5.0)]}), "negative dur"),
    ("surrogate-name", json.dumps({"traceEvents": [_ev(), _ev(cat="cpu_op", name="x\ud800")]}), "lone surrogate"),
])
def test_kineto_boundary(tmp_path, label, text, frag):
    from workflow_lib.importers.kineto import import_kineto
    p = tmp_path / f"{label}.json"
    p.write_text(text)
    with pytest.raises(InputError, match=frag) as e:
        import_kineto([p], incident_id="x", incidents_dir=tmp_path / "incs")
    assert str(p) in str(e.value)
    assert not (tmp_path / "incs").exists()


def _dump(entries, **kw):
    d = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}, "entries": entries}
    d.update(kw)
    return d


def _entry(**kw):
    e = {"record_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1, "p2p_seq_id": 0,
         "profiling_name": "nccl:all_reduce", "time_created_ns": 1_700_000_000_000_000_000, "input_sizes": [[4]],
         "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "completed"}
    e.update(kw)
    return e


@pytest.mark.parametrize("label, dump, frag", [
    ("p2p-seq-2-70", _dump([_entry(p2p_seq_id=2**70)]), "p2p_seq_id"),
    ("rank-2-31", _dump([_entry()], rank=2**31), "rank"),
    ("dtypes-int", _dump([_entry(input_dtypes=5)]), "input_dtypes"),
    ("record-id-bool", _dump([_entry(record_id=True)]), "boolean"),
    ("pg-surrogate", _dump([_entry(process_group=["0\ud800", "x"])]), "lone surrogate"),
    ("null-entry", _dump([None]), "entry 0"),
])
def test_torch_fr_boundary(tmp_path, label, dump, frag):
    from workflow_lib.importers.torch_fr import import_torch_fr
    p = tmp_path / "nccl_trace_rank_0.pkl"
    p.write_bytes(pickle.dumps(dump, protocol=4))
    with pytest.raises(InputError, match=frag):
        import_torch_fr([p], incident_id="x", incidents_dir=tmp_path / "incs")
    assert not (tmp_path / "incs").exists()


def test_torch_fr_rank_in_file_name_beyond_int32(tmp_path):
    from workflow_lib.importers.torch_fr import import_torch_fr
    p = tmp_path / f"nccl_trace_rank_{2**40}.pkl"
    p.write_bytes(pickle.dumps(_dump([_entry()]), protocol=4))
    with pytest.raises(InputError, match="rank in the file name"):
        import_torch_fr([p], incident_id="x", incidents_dir=tmp_path / "incs")


def test_torch_fr_merge_offset_that_would_wrap_is_refused(tmp_path):
    from workflow_lib.importers.torch_fr import import_torch_fr
    from workflow_lib.core.incident import source, write_incident
    inc = tmp_path / "incs" / "x"
    steps = pa.table({"step_id": [0], "thread_id": [1], "start_ns": [1], "end_ns": [2], "rank": pa.array([None], pa.int32())})
    write_incident(inc, {"incident_id": "x", "reason": "manual", "producer": "t", "created_unix_ns": 1,
                         "clock": {"host": "monotonic", "unix_minus_host_ns": -(2**63) + 1},
                         "sources": {"steps": source("observed")}}, {"steps": steps})
    p = tmp_path / "nccl_trace_rank_0.pkl"
    p.write_bytes(pickle.dumps(_dump([_entry()]), protocol=4))
    with pytest.raises(InputError, match="overflows int64|before time 0"):
        import_torch_fr([p], incident_id="x", incidents_dir=tmp_path / "incs")
