"""The plan, execution and steps_out records as typed classes (issue 27): writing through a class
gives the bytes the dict path gave, older versions read as the newest shape through
records.upgrade, and a record read keeps the digest of what was written (the identity the
records after it point at)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from workflow_lib.capture.types import StepsOut
from workflow_lib.core import records, typed
from workflow_lib.core.errors import RecordError
from workflow_lib.plan.types import Plan
from workflow_lib.trials.types import Execution

H200 = Path(__file__).resolve().parent / "fixtures" / "h200"
CLASSES = {"plan": Plan, "execution": Execution}


def _stage_records(newest: bool) -> list[Path]:
    """The fixture plan and execution records (written on the H200 by the dict writers) of their
    class's newest version (`newest`), or of an older one."""
    out = []
    for p in sorted(H200.glob("*/**/*.json")):
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("kind") in CLASSES \
                and (rec.get("schema_version") == CLASSES[rec["kind"]].SCHEMA_VERSION) == newest:
            out.append(p)
    return out


NEWEST = _stage_records(True)
OLDER = _stage_records(False)


def test_there_are_fixture_records_of_the_newest_and_older_versions():
    # no fixture execution is of version 3 (the H200 wrote them before it): an execution written
    # through its class is held to the dict path in test_an_older_execution_reads_as_version_3...
    assert {json.loads(p.read_text())["kind"] for p in NEWEST} == {"plan"}
    assert {json.loads(p.read_text())["kind"] for p in OLDER} == {"plan", "execution"}
    assert {json.loads(p.read_text())["schema_version"] for p in OLDER if "/execution/" in str(p)} == {1, 2}


@pytest.mark.parametrize("path", NEWEST, ids=lambda p: str(p.relative_to(H200)))
def test_a_record_written_through_its_class_is_byte_identical_to_the_dict_path(path, tmp_path):
    raw = records.read_record(path, json.loads(path.read_text())["kind"])
    obj = typed.read(path, CLASSES[raw["kind"]])
    by_class, by_dict = tmp_path / "class.json", tmp_path / "dict.json"
    d_class = records.write_record(by_class, obj.to_json(), obj.KIND)
    d_dict = records.write_record(by_dict, raw, obj.KIND)
    assert by_class.read_bytes() == by_dict.read_bytes()
    assert d_class == d_dict == obj.digest() == records.digest_of(raw)


def test_a_version_1_plan_and_its_executions_read_as_the_newest_shape_and_keep_their_digests():
    d = H200 / "demo-ab"
    plan = typed.read(d / "plan.json", Plan)
    raw = records.read_record(d / "plan.json", "plan")
    assert raw["schema_version"] == 1 and "python_distributions" not in raw
    assert plan.to_json()["schema_version"] == Plan.SCHEMA_VERSION == 2
    assert plan.python_distributions is None  # records.upgrade: version 1 never observed them
    records.validate(plan.to_json(), "plan")
    # The identity is the file's record, not the upgraded one: the executions and the
    # comparison written on the H200 point at it.
    assert plan.digest() == records.digest_of(raw) != records.digest_of(plan.to_json())
    comparison = records.read_record(d / "comparison.json", "comparison")
    assert comparison["plan_digest"] == plan.digest()
    for p in sorted((d / "execution").glob("*.json")):
        ex = typed.read(p, Execution)
        assert ex.plan_digest == plan.digest() and ex.to_json()["schema_version"] == Execution.SCHEMA_VERSION == 3
        assert comparison["execution_digests"][ex.block] == ex.digest()


def test_a_changed_record_has_the_digest_of_its_new_content():
    plan = typed.read(H200 / "demo-ab" / "plan.json", Plan)
    named = dataclasses.replace(plan, experiment="elsewhere")
    assert named.digest() == records.digest_of(named.to_json()) != plan.digest()


def test_upgrade_is_the_one_place_a_version_1_plan_changes():
    v1 = records.read_record(H200 / "demo-ab" / "plan.json", "plan")
    got = records.upgrade("plan", v1)
    assert got == {**v1, "schema_version": 2, "python_distributions": None}
    assert v1["schema_version"] == 1 and "python_distributions" not in v1  # the input is left as it was
    observed = dict(v1, python_distributions={"torch": "2.11.0"})
    assert records.upgrade("plan", observed)["python_distributions"] == {"torch": "2.11.0"}


@pytest.mark.parametrize("path", [p for p in OLDER if "/execution/" in str(p)], ids=lambda p: str(p.relative_to(H200)))
def test_an_older_execution_reads_as_version_3_with_nulls_and_keeps_its_digest(path, tmp_path):
    """records.upgrade, the one place: every run says null for what it did not measure (what
    leaving it out meant), so readers index runs[].work, ranks, alternates, capture."""
    raw = records.read_record(path, "execution")
    ex = typed.read(path, Execution)
    assert ex.digest() == records.digest_of(raw)
    for old, run in zip(raw["runs"], ex.runs, strict=True):
        new = run.to_json()  # a typed Run, written as the record holds it
        assert {k: v for k, v in new.items() if k in old} == old
        assert {k: new[k] for k in set(new) - set(old)} == dict.fromkeys(set(new) - set(old))
        assert {"metric_source", "work", "ranks", "alternates", "capture"} <= set(new)
    # written through the class, the upgraded record is the bytes the dict path gives it
    by_class, by_dict = tmp_path / "class.json", tmp_path / "dict.json"
    assert records.write_record(by_class, ex.to_json(), "execution") == \
        records.write_record(by_dict, records.upgrade("execution", raw), "execution")
    assert by_class.read_bytes() == by_dict.read_bytes()


def test_a_version_3_execution_lacking_a_run_field_is_refused():
    raw = records.upgrade("execution", records.read_record(H200 / "demo-ab" / "execution" / "b000.json", "execution"))
    records.validate(raw, "execution")
    run = {k: v for k, v in raw["runs"][0].items() if k != "work"}
    with pytest.raises(RecordError, match=r"runs/0: 'work' is a required property"):
        records.validate(dict(raw, runs=[run, *raw["runs"][1:]]), "execution")


def test_of_json_refuses_a_bad_record_naming_where():
    raw = records.read_record(H200 / "demo-ab" / "execution" / "b000.json", "execution")
    bad = dict(raw, status="finished")
    with pytest.raises(RecordError, match=r"^execution/b000.json: violates execution schema at status"):
        typed.of_json(Execution, bad, "execution/b000.json")


def test_steps_out_absent_rank_and_role_read_as_none(tmp_path):
    older = {"schema_version": 2, "kind": "steps_out", "covers": "iteration", "steps_ns": [3, 4],
             "items": [2, None], "tokens": None, "unusual": []}
    rec = typed.parse(json.dumps(older).encode(), StepsOut, tmp_path / "steps.json")
    assert (rec.rank, rec.role) == (None, None) and rec.work_of("item") == [2, None] and rec.work_of("step") is None
    v1 = typed.parse(json.dumps({"schema_version": 1, "steps_ns": [5], "unusual": []}).encode(), StepsOut, "v1.json")
    assert (v1.covers, v1.items, v1.tokens) == ("body", None, None)


def test_the_recorder_writes_steps_out_with_the_key_order_it_always_had(tmp_path, monkeypatch):
    """steps_out is written with json.dumps (no sorted keys): the class keeps the old literal's order."""
    from capture_helpers import recorder

    dest = tmp_path / "steps.json"
    monkeypatch.setenv("STALLCASE_STEPS_OUT", str(dest))
    rec = recorder(tmp_path, sources=("host",))
    with rec:
        for i in range(3):
            with rec.step(i, items=4):
                pass
    text = dest.read_text()
    assert list(json.loads(text)) == ["schema_version", "kind", "covers", "steps_ns", "items", "tokens", "unusual",
                                      "rank", "role", "pid"]
    back = typed.parse(text.encode(), StepsOut, dest)
    assert json.dumps(back.to_json(), separators=(",", ":")) + "\n" == text
    assert back.items == [4, 4, 4] and len(back.steps_ns) == 3


def test_a_field_named_like_a_record_method_is_refused():
    from workflow_lib.core.typed import doc, record

    with pytest.raises(TypeError, match=r"field\(s\) \['digest'\] are names of typed-record methods"):
        @record("plan", version=2)
        class Bad:
            digest: str = doc("would hide digest()")
