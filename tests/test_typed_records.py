"""Each typed record class and its JSON Schema say the same thing: the same fields, the same
required-ness and the same JSON types (issue 27). A field added to only one side fails here."""

from __future__ import annotations

import copy
import dataclasses
import json
import types as pytypes
import typing
from pathlib import Path

import pytest

from workflow_lib.capture.types import StepsOut
from workflow_lib.collectives.types import CollectivesRecord
from workflow_lib.compare.types import Comparison
from workflow_lib.core import records
from workflow_lib.core.errors import RecordError
from workflow_lib.core.typed import ABSENT, doc, record
from workflow_lib.core.types import IncidentManifest, Latest
from workflow_lib.diagnose.types import DiagnosisRecord
from workflow_lib.plan.types import Plan
from workflow_lib.preflight.types import Preflight
from workflow_lib.snapshot.types import Snapshot
from workflow_lib.trials.types import Execution

ROOT = Path(__file__).resolve().parents[1]
CLASSES = [Snapshot, Preflight, Latest, IncidentManifest, CollectivesRecord, Comparison, Plan, Execution, StepsOut,
           DiagnosisRecord]
PY_TO_JSON = {str: {"string"}, int: {"integer"}, float: {"number"}, bool: {"boolean"}, dict: {"object"},
              list: {"array"}, type(None): {"null"}}


def json_types_of_annotation(tp) -> set[str]:
    if typing.get_origin(tp) in (typing.Union, pytypes.UnionType):
        return set().union(*(json_types_of_annotation(a) for a in typing.get_args(tp)))
    base = typing.get_origin(tp) or tp
    return set(PY_TO_JSON[base])


def json_types_of_schema(prop: dict) -> set[str]:
    out: set[str] = set()
    t = prop.get("type")
    out |= {t} if isinstance(t, str) else set(t or ())
    for key in ("oneOf", "anyOf"):
        for alt in prop.get(key, ()):
            out |= json_types_of_schema(alt)
    values = [prop["const"]] if "const" in prop else prop.get("enum", [])
    for v in values:
        out |= PY_TO_JSON[type(v)]
    return out


def schema_shape(schema: dict, version: int) -> dict[str, tuple[bool, set[str]]]:
    """field -> (required, JSON types) in the newest version, schema_version and kind left out."""
    required = set(schema.get("required", ()))
    for cond in [schema, *schema.get("allOf", ())]:  # `if schema_version == N then required ...`
        if cond.get("if", {}).get("properties", {}).get("schema_version", {}).get("const") == version:
            required |= set(cond.get("then", {}).get("required", ()))
    return {name: (name in required, json_types_of_schema(prop))
            for name, prop in schema["properties"].items() if name not in ("schema_version", "kind")}


def class_shape(cls) -> dict[str, tuple[bool, set[str]]]:
    hints = typing.get_type_hints(cls)
    return {f.name: (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                     json_types_of_annotation(hints[f.name])) for f in dataclasses.fields(cls)}


def differences(cls, schema: dict) -> list[str]:
    want, got = schema_shape(schema, cls.SCHEMA_VERSION), class_shape(cls)
    out = [f"{n}: only in the schema" for n in sorted(set(want) - set(got))]
    out += [f"{n}: only in {cls.__name__}" for n in sorted(set(got) - set(want))]
    for n in sorted(set(want) & set(got)):
        if want[n][0] != got[n][0]:
            out.append(f"{n}: required in {'the schema' if want[n][0] else cls.__name__} only")
        if want[n][1] != got[n][1]:
            out.append(f"{n}: types {sorted(want[n][1])} in the schema, {sorted(got[n][1])} in {cls.__name__}")
    return out


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.KIND)
def test_class_and_schema_agree(cls):
    schema = records.load_schema(cls.KIND)
    assert cls.SCHEMA_VERSION == records.newest_version(cls.KIND)
    assert differences(cls, schema) == []


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.KIND)
def test_every_field_has_a_doc_line(cls):
    assert [f.name for f in dataclasses.fields(cls) if not f.metadata.get("doc")] == []


def test_a_field_added_to_the_schema_only_is_caught():
    schema = copy.deepcopy(records.load_schema("latest"))
    schema["properties"]["run_started_unix_ns"] = {"type": "integer"}
    assert differences(Latest, schema) == ["run_started_unix_ns: only in the schema"]


def test_a_field_added_to_the_class_only_is_caught():
    @record("latest", version=1)
    class LatestPlus(Latest):
        note: str = doc("a field the schema does not have", optional=True)

    assert differences(LatestPlus, records.load_schema("latest")) == ["note: only in LatestPlus"]


def test_required_ness_and_type_drift_are_caught():
    schema = copy.deepcopy(records.load_schema("preflight"))
    schema["required"].remove("node")
    schema["properties"]["block"]["type"] = "integer"
    assert differences(Preflight, schema) == ["block: types ['integer'] in the schema, ['string'] in Preflight",
                                              "node: required in Preflight only"]


def test_round_trip_and_absent_fields():
    latest = Latest(incident_id="i", run="aa-0123456789ab", run_dir="runs/aa-0123456789ab", plan_digest="0" * 64)
    data = latest.to_json()
    records.validate(data, "latest")
    assert Latest.from_json(data) == latest
    pre = Preflight(block="b000", plan_digest="0" * 64, incident_id="i", experiment=None, node="n", status="pass",
                    differences=[], missing=[], environment={})
    assert "checked_unix_ns" not in pre.to_json() and pre.checked_unix_ns is ABSENT
    assert pre.to_json()["experiment"] is None  # null is a value, kept


def test_from_json_refuses_an_unknown_field_and_an_older_version():
    with pytest.raises(RecordError, match=r"fields \['extra'\] are not in Latest"):
        Latest.from_json({"schema_version": 1, "kind": "latest", "incident_id": "i", "run": "r", "run_dir": "d",
                          "plan_digest": "p", "extra": 1})
    with pytest.raises(RecordError, match="read older records through records.upgrade"):
        CollectivesRecord.from_json({"schema_version": 1, "kind": "collectives"})


def test_records_written_by_the_stages_read_back_as_their_class(demo_pipeline):
    """The demo run's records (snapshot, preflight, latest, manifest, comparison, plan, execution) are
    instances of their class, and the digests the later records hold are those of the typed records read."""
    res = demo_pipeline.demo
    Snapshot.from_json(records.read_record(res / "snapshot.json", "snapshot"))
    Latest.from_json(records.read_record(res / "latest.json", "latest"))
    IncidentManifest.from_json(records.read_record(demo_pipeline.workdir / "incidents" / "demo" / "manifest.json",
                                                   "incident_manifest"))
    Comparison.from_json(records.read_record(res / "comparison.json", "comparison"))
    pre = sorted(res.glob("runs/*/preflight/*.json"))
    assert pre, "the demo run wrote no preflight record"
    Preflight.from_json(records.read_record(pre[0], "preflight"))
    comparison = records.read_record(res / "comparison.json", "comparison")
    plan = Plan.from_json(records.read_record(res / "plan.json", "plan"))
    assert plan.digest() == comparison["plan_digest"]
    executions = sorted(res.glob("runs/*/execution/*.json"))
    assert executions, "the demo run wrote no execution record"
    for path in executions:
        ex = Execution.from_json(records.read_record(path, "execution"))
        assert ex.plan_digest == plan.digest() and comparison["execution_digests"][ex.block] == ex.digest()


NEW_THIS_ROUND = [Plan, Execution, StepsOut]


@pytest.mark.parametrize("cls", NEW_THIS_ROUND, ids=lambda c: c.KIND)
def test_a_field_added_to_one_side_of_plan_execution_or_steps_out_is_caught(cls):
    schema = copy.deepcopy(records.load_schema(cls.KIND))
    schema["properties"]["wall_budget_ns"] = {"type": "integer"}
    assert differences(cls, schema) == ["wall_budget_ns: only in the schema"]

    @record(cls.KIND, version=cls.SCHEMA_VERSION)
    class Plus(cls):
        wall_budget_ns: int = doc("a field the schema does not have", optional=True)

    assert differences(Plus, records.load_schema(cls.KIND)) == ["wall_budget_ns: only in Plus"]


@pytest.mark.parametrize("cls", NEW_THIS_ROUND, ids=lambda c: c.KIND)
def test_a_required_field_made_optional_in_the_schema_is_caught(cls):
    schema = copy.deepcopy(records.load_schema(cls.KIND))
    first = next(n for n in schema["required"] if n not in ("schema_version", "kind"))
    schema["required"].remove(first)
    assert differences(cls, schema) == [f"{first}: required in {cls.__name__} only"]
