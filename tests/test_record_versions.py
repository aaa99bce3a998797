"""One version per record kind: the constant its writer uses is the newest its schema reads, and a
record from a newer stallcase is refused with "upgrade stallcase" for every kind (issue 27: the
check read only `const`, so the six `enum: [1, 2]` kinds got a generic schema error)."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from workflow_lib.core import records
from workflow_lib.core.errors import RecordError

ROOT = Path(__file__).resolve().parents[1]

# kind -> (module, constant): the one definition of the version each kind's writer stamps.
VERSION_CONSTANTS = {
    "snapshot": ("workflow_lib.snapshot.types", "SCHEMA_VERSION"),
    "collectives": ("workflow_lib.collectives.types", "SCHEMA_VERSION"),
    "diagnosis": ("workflow_lib.diagnose.types", "DIAGNOSIS_VERSION"),
    "plan": ("workflow_lib.plan.types", "SCHEMA_VERSION"),
    "preflight": ("workflow_lib.preflight.types", "SCHEMA_VERSION"),
    "execution": ("workflow_lib.trials.types", "SCHEMA_VERSION"),
    "comparison": ("workflow_lib.compare.types", "SCHEMA_VERSION"),
    "steps_out": ("workflow_lib.capture.types", "SCHEMA_VERSION"),
    "incident_manifest": ("workflow_lib.core.types", "MANIFEST_VERSION"),
    "latest": ("workflow_lib.core.types", "LATEST_VERSION"),
    "made": ("workflow_lib.core.types", "MADE_VERSION"),
    "look": ("workflow_lib.compare.types", "LOOK_VERSION"),
}


def versioned_kinds() -> list[str]:
    out = []
    for p in sorted((ROOT / "schemas").glob("*.schema.json")):
        if "schema_version" in json.loads(p.read_text()).get("properties", {}):
            out.append(p.name.removesuffix(".schema.json"))
    return out


def test_every_versioned_schema_has_one_constant():
    assert sorted(VERSION_CONSTANTS) == versioned_kinds()


@pytest.mark.parametrize("kind", sorted(VERSION_CONSTANTS))
def test_constant_is_the_newest_version_the_schema_reads(kind):
    module, name = VERSION_CONSTANTS[kind]
    assert getattr(importlib.import_module(module), name) == records.newest_version(kind)


@pytest.mark.parametrize("kind", sorted(VERSION_CONSTANTS))
def test_a_record_from_a_newer_stallcase_says_upgrade(kind):
    newest = records.newest_version(kind)
    data = json.dumps({"schema_version": newest + 1, "kind": kind}).encode()
    with pytest.raises(RecordError, match=rf"schema_version {newest + 1} is newer than this stallcase reads "
                                          rf"\(newest supported: {newest}\); upgrade stallcase"):
        records.parse_record(data, kind, f"{kind}.json")


def test_newest_version_reads_enum_and_const():
    assert records.newest_version("plan") == 2  # enum: [1, 2]
    assert records.newest_version("snapshot") == 1  # const: 1


def test_no_writer_stamps_a_literal_version():
    """A version is written from its constant, never as a number in the record literal."""
    literal = re.compile(r"""["']schema_version["']\s*:\s*\d|schema_version\s*=\s*\d""")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "workflow_lib").rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert hits == []


def test_upgrade_steps_out_1_gives_the_newest_shape():
    v1 = {"schema_version": 1, "steps_ns": [5, 6], "unusual": []}
    records.validate(v1, "steps_out")
    got = records.upgrade("steps_out", v1)
    assert got == {"schema_version": 2, "kind": "steps_out", "covers": "body", "steps_ns": [5, 6],
                   "items": None, "tokens": None, "unusual": []}
    assert v1["schema_version"] == 1  # the input is left as it was
    assert records.upgrade("steps_out", got) is got  # already newest: unchanged


def test_upgrade_refuses_what_an_old_record_never_measured():
    with pytest.raises(RecordError, match="schema_version 1 cannot be read as version 2: re-run the collectives rule"):
        records.upgrade("collectives", {"schema_version": 1, "kind": "collectives"}, where="c.json")


def test_a_version_1_comparison_reads_as_the_class_with_no_components():
    """A real version 1 record (the H200 demo A/A): the verdict and its numbers as written, no
    component, and a sentence that says why; its digest stays the file's."""
    from workflow_lib.compare.types import Comparison
    from workflow_lib.core import typed

    path = ROOT / "tests" / "fixtures" / "h200" / "demo-aa" / "comparison.json"
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 1 and "components" not in raw
    comp = typed.read(path, Comparison)
    assert comp.verdict == raw["verdict"] and comp.estimate.ratio == raw["estimate"]["ratio"]
    assert comp.components == [] and comp.predictions == [] and comp.change_explained.unresolved == []
    assert "schema version 1" in comp.sentence and "rerun the compare stage" in comp.sentence
    assert comp.digest() == records.digest_of(raw)


def test_metric_reads_a_version_1_steps_file(tmp_path):
    from workflow_lib.plan import metric

    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"schema_version": 1, "steps_ns": [10, 20, 30], "unusual": []}))
    assert metric._steps_file(path).covers == "body"
