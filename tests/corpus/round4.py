"""Corpus families of issue 38 (generate.py calls `generate(g)` after round3.py): the three
held-out families that still broke. Each must end in one clear line, a non-zero exit and
nothing written.

  - a Kineto import whose custom step pattern captures digits of another script ('٣', '३'):
    int() reads them as numbers, so they would be mixed with ASCII step ids;
  - a collectives table whose JSON-text columns (input_sizes, output_sizes, dtypes,
    group_ranks) hold broken JSON, or JSON of the wrong shape (`null` was an AttributeError
    deep in collectives/match.py);
  - an artifact that is present but not as recorded (another size, another digest): said as
    such, not "missing artifact".
"""

from __future__ import annotations

import json

import hardening as H
from workflow_lib.core.cas import hash_bytes
from workflow_lib.core.formats import fr_dump

G = None  # the generate module
CAT = "r4_heldout"


def _rel(p) -> str:
    return G.rel(p)


def kineto_step_digits() -> None:
    for label, name, pattern in [
        ("kineto-step-arabic-indic", "ProfilerStep#\u0663", r"ProfilerStep#([^a-z]+)"),
        ("kineto-step-devanagari", "ProfilerStep#\u0969\u0968", r"ProfilerStep#(\S+)"),
        ("kineto-step-fullwidth", "ProfilerStep#\uff17", r"ProfilerStep#(.+)"),
        ("kineto-step-superscript", "ProfilerStep#\u00b2", r"ProfilerStep#(.)"),
    ]:
        events = [H._ev(), H._ev(name=name, ts=200.0), H._kern()]
        H._file_entry(CAT, label, "t.json", H._trace(events), "import_kineto", "a step id is ASCII digits",
                      args=["--step-pattern", pattern])


def collectives_broken_json() -> None:
    good = fr_dump.dump_table(H._dump([H._entry(), H._entry(record_id=1, collective_seq_id=2)]), 0, "corpus")
    for label, column, value, frag in [
        ("group-ranks-truncated", "group_ranks", "[0, 1", "column group_ranks"),
        ("group-ranks-null", "group_ranks", "null", "column group_ranks"),
        ("group-ranks-text", "group_ranks", '["0", "1"]', "column group_ranks"),
        ("dtypes-null", "dtypes", "null", "column dtypes"),
        ("dtypes-broken", "dtypes", '{"input": ["Float"', "column dtypes"),
        ("dtypes-input-text", "dtypes", '{"input": "Float"}', "column dtypes"),
        ("input-sizes-broken", "input_sizes", "[[4]", "column input_sizes"),
        ("output-sizes-object", "output_sizes", '{"a": 1}', "column output_sizes"),
    ]:
        col = good[column].to_pylist()
        col[-1] = value
        table = good.set_column(good.schema.get_field_index(column), column, G.pa.array(col, G.pa.string()))
        inc = G.new_incident(CAT, f"collectives-{label}", {"collectives": table})
        G.add(CAT, f"collectives-{label}", "argv", _rel(inc), frag, input_rel=_rel(inc))
        G.ENTRIES[-1]["argv"] = ["collectives", "{w}/" + _rel(inc)]


def artifacts_changed() -> None:
    content = b"print('the workload as it is now')\n"
    for label, role, size, digest, frag in [
        ("artifact-source-other-size", "source", 3, hash_bytes(b"abc"), f"present but {len(content)} bytes, the manifest records 3"),
        ("artifact-source-other-digest", "source", len(content), hash_bytes(b"x" * len(content)), "hashes to"),
        ("artifact-input-other-digest", "input", len(content), hash_bytes(b"y" * len(content)), "hashes to"),
        ("artifact-binary-other-size", "binary", 10, hash_bytes(b"0123456789"), f"present but {len(content)} bytes"),
    ]:
        inc = G.new_incident(CAT, label)
        f = inc / "files" / "work.py"
        f.parent.mkdir()
        f.write_bytes(content)
        m = G.read_manifest(inc)
        m["artifacts"] = [{"role": role, "path": "{w}/" + _rel(f), "relpath": None, "digest": digest, "size": size}]
        G.write_manifest(inc, m)
        G.add(CAT, label, "ingest", _rel(f), frag)
        G.ENTRIES[-1]["fill_w"] = [_rel(inc / "manifest.json")]


def generate(g) -> None:
    global G
    G = g
    kineto_step_digits()
    collectives_broken_json()
    artifacts_changed()
    json.dumps(G.ENTRIES)  # every entry is JSON
