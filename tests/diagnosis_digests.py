"""Digests of the diagnosis of every committed fixture the tests diagnose, for
tests/test_diagnosis_byte_identical.py: a change to the diagnosis engine must leave them as
they are (issue 37: the diagnosis is the same before and after).

What is diagnosed (`cases()`):
- every incident directory under tests/fixtures (recorder and Kineto captures, the H200 data
  movement, transformer, multi-process and two-rank captures);
- every Kineto trace under tests/fixtures (tests/fixtures/kineto, the real traces written by
  others, the two-rank H200 job with its flight-recorder dumps), imported as the tests do;
- the synthetic incidents the equality tests build (tests/random_incident.py,
  tests/host_incident.py, tests/data_movement_synthetic.py, test_diagnose_job's job), small
  and above 2,000 steps (where evidence is kept only for the steps a reader opens first).
The corpus (tests/corpus) is left out: every entry of it is refused before a diagnosis.

What is compared, per case: the record as written (diagnosis.json) less the table digests,
and each Parquet table by content (its schema and its rows as canonical JSON), not by bytes:
a table's bytes follow its row groups, which are how it was written, not what it says. The
record's own bytes are compared after that one substitution (the `tables` digests become the
content digests), so every other field is compared byte for byte.

Regenerate (from the repository root; CHECKOUT is a git checkout of the code to record, e.g.
`git worktree add /tmp/base 3ae5cf8`):

    .venv/bin/python -m tests.diagnosis_digests --checkout /tmp/base --out tests/fixtures/diagnosis_digests.json

The checkout's `workflow_lib` is put first on the path of a child process; the cases and the
digest are this file's (the fixtures and builders of the current tree).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
EXPECTED = FIX / "diagnosis_digests.json"
ZERO = "0" * 64


def _digest(data: bytes) -> str:
    import blake3

    return blake3.blake3(data).hexdigest()


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def table_digest(path: Path) -> str:
    """A Parquet table by what it holds: schema (names and types) and rows, not its bytes."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    schema = [(f.name, str(f.type)) for f in t.schema]
    return _digest(_canonical({"schema": schema, "rows": t.to_pylist()}))


RUN_DEPENDENT = "<run-dependent>"


def files_digest(record_path: Path, imported: bool = False) -> dict:
    """{record, steps, findings}: the record's bytes with its table digests replaced by the
    tables' content digests, and the two tables' content digests. `imported`: the incident
    was imported in this run, so its snapshot digest (of a manifest that records when the
    import ran) is left out."""
    from workflow_lib.diagnose import table_paths

    out = {name: table_digest(p) for name, p in table_paths(record_path).items() if p.exists()}
    rec = json.loads(record_path.read_bytes())
    for name, t in rec.get("step_tables", {}).items():  # version 3; older records hold steps inline
        t["digest"] = out.get(name, "absent")
    if imported:
        rec["snapshot_digest"] = RUN_DEPENDENT
    out["record"] = _digest(_canonical(rec))
    return dict(sorted(out.items()))


# --- the cases -----------------------------------------------------------------------------

def _incident_dirs() -> list[Path]:
    return sorted(p.parent for p in FIX.rglob("manifest.json") if (p.parent / "tables").is_dir())


def _kineto_sets() -> dict[str, list[Path]]:
    sets = {f"kineto/{p.name}": [p] for p in sorted((FIX / "kineto").glob("*.json*"))}
    sets.update({f"real_traces/{p.name}": [p] for p in sorted((FIX / "real_traces").glob("*.json*"))})
    sets["h200x2_collectives/kineto_rank_0"] = [FIX / "h200x2_collectives" / "kineto_rank_0.json.gz"]
    sets["h200x2_collectives/kineto_ranks"] = sorted((FIX / "h200x2_collectives").glob("kineto_rank_*.json.gz"))
    return sets


def _synthetic():
    """(name, Incident) of the builders the equality tests use."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the builders import each other by bare name
    from tests import data_movement_synthetic as dms
    from tests.host_incident import host_incident
    from tests.random_incident import random_incident

    for seed in range(12):
        yield f"random/{seed}", random_incident(seed)
    yield "random/2100-steps", random_incident(5, steps=2100)
    for seed in range(3):
        yield f"host/{seed}", host_incident(seed, steps=200)
    yield "host/2500-steps", host_incident(7, steps=2500)
    yield "host/no-sched", host_incident(3, steps=120, sched=False)
    yield "host/no-runtime-api", host_incident(4, steps=120, runtime_api=False)
    for case in sorted(dms.CASES):
        yield f"data_movement/{case}", dms.incident(case)[0]
    from tests.test_diagnose_job import _sync_job

    yield "job/sync", _sync_job()
    yield "job/steady-slow", _sync_job(steps=12, tail=lambda s: 9_000_000 if s % 3 == 2 else 1_000_000)


def compute() -> dict[str, dict]:
    """Every case's digests (or the error a case raised), with the code on sys.path."""
    from workflow_lib.diagnose import diagnose, diagnose_to_file, write_diagnosis
    from workflow_lib.importers.kineto import import_kineto
    from workflow_lib.importers.torch_fr import import_torch_fr

    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)

        def run(name: str, fn, imported: bool = False) -> None:
            d = tmp / name.replace("/", "__")
            d.mkdir(parents=True)
            try:
                out[name] = files_digest(fn(d), imported)
            except Exception as e:  # a case the code refuses is recorded as refused
                out[name] = {"error": f"{type(e).__name__}: {str(e).replace(str(d), '<tmp>').replace(str(ROOT), '<repo>')[:300]}"}

        for inc_dir in _incident_dirs():
            def one(d, inc_dir=inc_dir):
                diagnose_to_file(inc_dir, d / "diagnosis.json")
                return d / "diagnosis.json"
            run(f"incident/{inc_dir.relative_to(FIX)}", one)
        for name, files in _kineto_sets().items():
            def one(d, files=files):
                inc = import_kineto(files, incident_id="t", incidents_dir=d / "inc")
                diagnose_to_file(inc, d / "diagnosis.json")
                return d / "diagnosis.json"
            run(f"kineto/{name}", one, imported=True)

        def job(d):
            x2 = FIX / "h200x2_collectives"
            import_kineto(sorted(x2.glob("kineto_rank_*.json.gz")), incident_id="x2", incidents_dir=d / "inc")
            inc = import_torch_fr(sorted(x2.glob("nccl_trace_rank_*")), incident_id="x2", incidents_dir=d / "inc")
            diagnose_to_file(inc, d / "diagnosis.json")
            return d / "diagnosis.json"
        run("kineto+fr/h200x2_collectives", job, imported=True)
        for f in sorted(p for p in (FIX / "h200_fr_hang").iterdir() if p.suffix in (".pkl", ".json", "") and p.name != "meta.json"):
            def dumps(d, f=f):
                import shutil

                (d / "dump").mkdir()
                shutil.copy(f, d / "dump" / "nccl_trace_rank_0")  # as the tests name a rank's dump
                inc = import_torch_fr([d / "dump" / "nccl_trace_rank_0"], incident_id="fr", incidents_dir=d / "inc")
                diagnose_to_file(inc, d / "diagnosis.json")
                return d / "diagnosis.json"
            run(f"fr/{f.name}", dumps, imported=True)
        for name, inc in _synthetic():
            def mem(d, inc=inc):
                write_diagnosis(d / "diagnosis.json", diagnose(inc, incident_id="s", snapshot_digest=ZERO, validate=False))
                return d / "diagnosis.json"
            run(f"synthetic/{name}", mem)
    return dict(sorted(out.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", help="a git checkout whose workflow_lib is diagnosed (default: this tree)")
    ap.add_argument("--out", help="write the digests here (default: print)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.checkout and not a.child:
        # Only the checkout's workflow_lib comes first (a link to it in an empty folder, also the
        # working directory); `tests` stays this tree's.
        with tempfile.TemporaryDirectory() as link_dir:
            os.symlink(Path(a.checkout).resolve() / "workflow_lib", Path(link_dir) / "workflow_lib")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([link_dir, str(ROOT)]))
            cmd = [sys.executable, "-c", "import sys; from tests.diagnosis_digests import main; sys.exit(main(sys.argv[1:]))",
                   "--child", "--checkout", str(Path(a.checkout).resolve()),
                   *(["--out", str(Path(a.out).resolve())] if a.out else [])]
            return subprocess.run(cmd, env=env, cwd=link_dir).returncode
    import workflow_lib

    digests = compute()
    commit = ""
    where = Path(a.checkout) if a.checkout else ROOT
    print(f"diagnosing with {Path(workflow_lib.__file__).resolve().parent}", file=sys.stderr)
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    doc = {"about": "Diagnosis digests of every fixture case (tests/diagnosis_digests.py says what and how to regenerate).",
           "generated_from": commit, "cases": digests}
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
