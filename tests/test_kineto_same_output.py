"""The Kineto import and the diagnosis written from it give the same output as the code before
the speed work of issue 26 (main at 5819bb6): the digests below were recorded from that code.

Each case takes a different path through the parser: the committed fixtures (laid out by
json.dumps(indent=1): the regex separator path, and gzip), the same events one per line as
Kineto writes them (the substring fast path, with a string-pid "Spans" row), a compact layout,
a trace with odd value types (the json.loads + clean-up path), and a 1,100-step trace (the
diagnosis spooled and validated on a sample). Content digests (rows, schema, manifest, the
diagnosis text) hold on any pyarrow; the Parquet files' bytes are pinned for the pyarrow that
recorded them (its version is written into every file's footer)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import blake3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.kineto_trace import synthetic_trace
from workflow_lib.core import json_pretty
from workflow_lib.diagnose import diagnose_to_file, load_diagnosis
from workflow_lib.importers.kineto import import_kineto

FIX = Path(__file__).parent / "fixtures" / "kineto"


def _lines_layout(doc: dict, path: Path) -> Path:
    """One event per line, joined by Kineto's own separator (benchmarks/diagnose_speed.py's layout)."""
    doc = dict(doc)
    events = doc.pop("traceEvents")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc)[:-1] + ',\n  "traceEvents": [\n')
        fh.write(",\n".join("  " + json.dumps(e) for e in events))
        fh.write("\n  ]\n}\n")
    return path


def _fixture_doc(name: str) -> dict:
    p = FIX / name
    return json.loads(gzip.decompress(p.read_bytes()) if name.endswith(".gz") else p.read_bytes())


def _case(name: str, tmp: Path) -> list[Path]:
    if name == "fixtures_two_ranks":
        return [FIX / "new_rank0.json", FIX / "new_rank1.json.gz"]
    if name == "fixture_old_spellings":
        return [FIX / "old_norank.json"]
    if name == "kineto_lines":
        return [_lines_layout(_fixture_doc("new_rank0.json"), tmp / "lines0.json"),
                _lines_layout(_fixture_doc("new_rank1.json.gz"), tmp / "lines1.json")]
    if name == "compact":
        p = tmp / "compact.json"
        p.write_text(json.dumps(_fixture_doc("new_rank0.json"), separators=(",", ":")), encoding="utf-8")
        return [p]
    if name == "odd_values":
        doc = _fixture_doc("new_rank0.json")
        next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")["args"]["device"] = "0"
        next(e for e in doc["traceEvents"] if e.get("cat") == "gpu_memcpy")["args"]["bytes"] = 12.0
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "pid": "gpu0", "tid": 7.0, "ts": "late", "dur": 1})
        return [_lines_layout(doc, tmp / "odd.json")]
    if name == "long_1100_steps":
        return [_lines_layout(synthetic_trace(steps=1100, kernels_per_step=3), tmp / "long.json")]
    raise KeyError(name)


def _digests(files: list[Path], tmp: Path) -> dict:
    out_dir = import_kineto(files, incident_id="pin", incidents_dir=tmp / "incidents")
    diagnose_to_file(out_dir, out_dir / "diagnosis.json")
    d: dict = {"tables": {}, "parquet_bytes": {}}
    for f in sorted((out_dir / "tables").glob("*.parquet")):
        t = pq.read_table(f)
        content = json.dumps([t.schema.to_string(show_schema_metadata=True), t.to_pydict()], sort_keys=True).encode()
        d["tables"][f.stem] = blake3.blake3(content).hexdigest()[:32]
        d["parquet_bytes"][f.stem] = blake3.blake3(f.read_bytes()).hexdigest()[:32]
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    for a in manifest["artifacts"]:
        a["path"] = Path(a["path"]).name  # the input's absolute path is this test's tmp_path
    manifest["created_unix_ns"] = 0  # the time of the import
    d["manifest"] = blake3.blake3(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:32]
    # The diagnosis as the version-2 file that 5819bb6 wrote: its steps inline, its slow steps
    # without their findings (version 3 keeps those in the record and the steps in tables).
    # The snapshot digest depends on the tmp path: blanked.
    diag = load_diagnosis(out_dir / "diagnosis.json")
    v2 = {k: v for k, v in diag.record.items() if k != "step_tables"}
    v2["schema_version"] = 2
    v2["summary"] = dict(v2["summary"], slow_steps=[{k: v for k, v in s.items() if k != "findings"}
                                                    for s in v2["summary"]["slow_steps"]])
    order = ("schema_version", "kind", "incident_id", "snapshot_digest", "options", "sources", "checks", "steps")
    # Version 4 adds where each finding sits on its step's timeline (findings[].at), which
    # version 2 did not have: left out, so the rest is compared as before.
    steps = [dict(s, findings=[{k: v for k, v in f.items() if k != "at"} for f in s["findings"]]) for s in diag.steps()]
    v2 = {**{k: v2[k] for k in order if k in v2}, "steps": steps, **{k: v for k, v in v2.items() if k not in order}}
    v2["snapshot_digest"] = "0" * 64
    text = "".join(json_pretty.chunks(v2)) + "\n"
    d["diagnosis"] = blake3.blake3(text.encode()).hexdigest()[:32]
    return d


# Recorded from main at 5819bb6 (pyarrow 26.0.1): `python -m tests.test_kineto_same_output`. The diagnosis
# digests re-recorded after issue 34 (a sync credited with the lead it took away, copies never GPU work),
# and again for first_call (a new check: its row in every step's findings, its four options; it
# attributes nothing in these traces): the import (tables, manifest) is unchanged; the diagnosis
# changed on purpose (tests/test_kineto_import.py, tests/test_diagnose_first_call.py).
EXPECTED: dict = {
    "compact": {
        "tables": {"kernels": "025515f53627718500ba8cc653fcb04c", "memcpy": "97d572844bad885d467df024859ce2e7", "runtime_api": "02bace1c449b463e8333c2720520870c", "spans": "fa4dea9be57920f95efb17d7690e82ee", "steps": "7d12c6680be4609924fd98ad146d83a6"},
        "parquet_bytes": {"kernels": "8cc7a6395d886121872878259803912e", "memcpy": "acd918fcf7db2a018041ea2e141c93ac", "runtime_api": "744f4484d18d5591d4e80364d325d88a", "spans": "2350475c969a2a104308175f6d516a91", "steps": "1b6d7028559f3aacb751f1b03bd8a631"},
        "manifest": "2efacb0f91cf2d15ac3db278666b1a36", "diagnosis": "8a1e683c57027675190164e979299091",
    },
    "fixture_old_spellings": {
        "tables": {"kernels": "025515f53627718500ba8cc653fcb04c", "memcpy": "97d572844bad885d467df024859ce2e7", "runtime_api": "02bace1c449b463e8333c2720520870c", "spans": "fa4dea9be57920f95efb17d7690e82ee", "steps": "7d12c6680be4609924fd98ad146d83a6"},
        "parquet_bytes": {"kernels": "8cc7a6395d886121872878259803912e", "memcpy": "acd918fcf7db2a018041ea2e141c93ac", "runtime_api": "744f4484d18d5591d4e80364d325d88a", "spans": "2350475c969a2a104308175f6d516a91", "steps": "1b6d7028559f3aacb751f1b03bd8a631"},
        "manifest": "38441e7f0937283627b43693fb167bbb", "diagnosis": "8a1e683c57027675190164e979299091",
    },
    "fixtures_two_ranks": {
        "tables": {"kernels": "1f7814d86b79a1fbdb443cefb2d2d754", "memcpy": "50fa5bca7e560606352242cd386aa704", "runtime_api": "83a9d5f2dc70cc8d0ce9db854c426f35", "spans": "26eba71cb879a4663e5518861c729c10", "steps": "139ab5a48c21383ad776b710601be689"},
        "parquet_bytes": {"kernels": "029d50d5b442cd11bb8a169c17a764ef", "memcpy": "8fd29607475f7266f3755bd03c171bbe", "runtime_api": "41199b9955f5f1151a2f26745c843747", "spans": "c6424ef283526d05ec2a242352597a06", "steps": "61e1e12bb68911a59940a9d8df0fb3e0"},
        "manifest": "0d72e9eeb2efa1da949dafd3e3591d43", "diagnosis": "003c111b5b53eae33e40c64b5c7a5c36",
    },
    "kineto_lines": {
        "tables": {"kernels": "1f7814d86b79a1fbdb443cefb2d2d754", "memcpy": "50fa5bca7e560606352242cd386aa704", "runtime_api": "83a9d5f2dc70cc8d0ce9db854c426f35", "spans": "26eba71cb879a4663e5518861c729c10", "steps": "139ab5a48c21383ad776b710601be689"},
        "parquet_bytes": {"kernels": "029d50d5b442cd11bb8a169c17a764ef", "memcpy": "8fd29607475f7266f3755bd03c171bbe", "runtime_api": "41199b9955f5f1151a2f26745c843747", "spans": "c6424ef283526d05ec2a242352597a06", "steps": "61e1e12bb68911a59940a9d8df0fb3e0"},
        "manifest": "182f1e5e900d549129d73caf8e42d40a", "diagnosis": "003c111b5b53eae33e40c64b5c7a5c36",
    },
    "long_1100_steps": {
        "tables": {"kernels": "731ec3c899a5f9c87fe5bab6d3048d1f", "memcpy": "97d572844bad885d467df024859ce2e7", "runtime_api": "135af87cdb0d3e0116e828b8a55921e7", "spans": "438e168f9f1d639e5e49d4190811e719", "steps": "6c5450147ee9770713c3b12749e29298"},
        "parquet_bytes": {"kernels": "b50d7b37686ba91aee19959f3e745f11", "memcpy": "acd918fcf7db2a018041ea2e141c93ac", "runtime_api": "bf65d7809cb985d5ca57eed69b942590", "spans": "6a28e9c46ee14a347e473151c50e4714", "steps": "e9cecb3edfb2dda82f1f4617f3349add"},
        "manifest": "4ef14b5e5459703a8f919dfc924d8d19", "diagnosis": "2d0c387daffc3075ae1717305e05f5a5",
    },
    "odd_values": {
        "tables": {"kernels": "025515f53627718500ba8cc653fcb04c", "memcpy": "e85d2d2fc1f0a7061768929d91018594", "runtime_api": "02bace1c449b463e8333c2720520870c", "spans": "fa4dea9be57920f95efb17d7690e82ee", "steps": "7d12c6680be4609924fd98ad146d83a6"},
        "parquet_bytes": {"kernels": "8cc7a6395d886121872878259803912e", "memcpy": "6217ea07ce3e6a467612c5adfbf92a4d", "runtime_api": "744f4484d18d5591d4e80364d325d88a", "spans": "2350475c969a2a104308175f6d516a91", "steps": "1b6d7028559f3aacb751f1b03bd8a631"},
        "manifest": "402e348ffca6695196b393d79c8cfbd5", "diagnosis": "8a1e683c57027675190164e979299091",
    },
}
PARQUET_RECORDED_WITH = "26.0.1"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_import_and_diagnosis_unchanged(name, tmp_path):
    got = _digests(_case(name, tmp_path), tmp_path)
    want = EXPECTED[name]
    assert got["tables"] == want["tables"]
    assert got["manifest"] == want["manifest"]
    assert got["diagnosis"] == want["diagnosis"]
    if pa.__version__ == PARQUET_RECORDED_WITH:  # the footer names the writer's version: bytes differ on another
        assert got["parquet_bytes"] == want["parquet_bytes"]


def test_every_case_is_pinned():
    assert set(EXPECTED) == {"fixtures_two_ranks", "fixture_old_spellings", "kineto_lines", "compact", "odd_values",
                             "long_1100_steps"}


if __name__ == "__main__":  # print the digests of the code checked out, to record them above
    import tempfile

    names = ["fixtures_two_ranks", "fixture_old_spellings", "kineto_lines", "compact", "odd_values", "long_1100_steps"]
    res = {}
    for n in names:
        tmp = Path(tempfile.mkdtemp())
        try:
            res[n] = _digests(_case(n, tmp), tmp)
        finally:
            shutil.rmtree(tmp)
    print(json.dumps(res, indent=4, sort_keys=True))
