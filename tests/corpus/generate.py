"""Generate the bad-input corpus: every entry must be rejected with one clean error line.

    python tests/corpus/generate.py [OUT_DIR]     (default: this directory)

Deterministic (fixed times, fixed contents; Parquet bytes depend only on the pyarrow
version). Writes OUT_DIR/<category>/<entry>/... and OUT_DIR/expected.json, one object
per entry:
    id        "<category>/<entry>"
    consumer  which CLI entry point reads it: ingest, diagnose, verify, verify_incidents,
              import_kineto, import_nsys, import_torch_fr (tests/test_corpus.py builds the argv)
    input     path of the input, relative to OUT_DIR
    names     the file (relative to OUT_DIR) or flag the error line must name
    fragment  a piece of the expected problem text
    args      extra CLI arguments (optional)
Each incident entry is a directory <entry>/inc/ (the incident) plus, for path-escape
entries, files beside it that a hostile manifest or symlink points at.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from workflow_lib.core import tables as T  # noqa: E402
from workflow_lib.core.cas import hash_bytes, hash_file  # noqa: E402
from workflow_lib.core.incident import source, write_incident  # noqa: E402

CREATED_NS = 1_764_460_800_000_000_000  # 2025-11-30T00:00:00Z, fixed for determinism
ENTRIES: list[dict] = []
OUT: Path = HERE


# ---------------------------------------------------------------- helpers

def _steps(n: int = 6, *, rank=None) -> pa.Table:
    starts = [1_000_000 + i * 1_000_000 for i in range(n)]
    return pa.table({"step_id": list(range(n)), "thread_id": [7] * n, "start_ns": starts,
                     "end_ns": [s + 900_000 for s in starts], "rank": pa.array([rank] * n, pa.int32())})


def _kernels(n: int = 8) -> pa.Table:
    starts = [1_100_000 + i * 600_000 for i in range(n)]
    return pa.table({"name": [f"k{i % 3}" for i in range(n)], "device": [0] * n, "stream": [7] * n,
                     "correlation_id": list(range(n)), "start_ns": starts, "end_ns": [s + 400_000 for s in starts]})


def _runtime(n: int = 8) -> pa.Table:
    starts = [1_050_000 + i * 600_000 for i in range(n)]
    return pa.table({"name": ["cudaLaunchKernel"] * n, "thread_id": [7] * n, "correlation_id": list(range(n)),
                     "start_ns": starts, "end_ns": [s + 5_000 for s in starts], "is_sync": [False] * n})


def _spans(n: int = 6) -> pa.Table:
    starts = [1_000_000 + i * 1_000_000 for i in range(n)]
    return pa.table({"name": [f"step{i}" for i in range(n)], "thread_id": [7] * n, "depth": [0] * n,
                     "start_ns": starts, "end_ns": [s + 900_000 for s in starts]})


def _memcpy(n: int = 4) -> pa.Table:
    starts = [1_200_000 + i * 1_000_000 for i in range(n)]
    return pa.table({"kind": ["HtoD"] * n, "device": [0] * n, "stream": [7] * n, "bytes": [4096] * n,
                     "start_ns": starts, "end_ns": [s + 10_000 for s in starts]})


BUILDERS = {"steps": _steps, "kernels": _kernels, "runtime_api": _runtime, "spans": _spans, "memcpy": _memcpy}


def _manifest(incident_id: str = "inc") -> dict:
    return {
        "incident_id": incident_id, "reason": "manual", "producer": "corpus",
        "created_unix_ns": CREATED_NS,
        "clock": {"host": "monotonic", "unix_minus_host_ns": 0},
        "sources": {"kernels": source("observed"), "runtime_api": source("observed"),
                    "nvml": source("not_observed", "corpus has no GPU")},
        "artifacts": [], "workload": None,
    }


def good_incident(dest: Path, tables: dict[str, pa.Table] | None = None) -> Path:
    """A valid incident at dest (steps + kernels by default)."""
    if tables is None:
        tables = {"steps": _steps(), "kernels": _kernels()}
    write_incident(dest, _manifest(), tables)
    return dest


def raw_table(dest: Path, table: pa.Table) -> None:
    """Write a Parquet file as is (no contract conforming): for hostile tables."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, dest, compression="zstd")


def read_manifest(inc: Path) -> dict:
    return json.loads((inc / "manifest.json").read_text())


def write_manifest(inc: Path, m) -> None:
    (inc / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True, ensure_ascii=True) + "\n")


def redigest(inc: Path, name: str) -> None:
    """Point the manifest's digest at the (damaged) file, so the reader gets past the digest check."""
    m = read_manifest(inc)
    m["tables"][name]["digest"] = hash_file(inc / m["tables"][name]["path"])
    write_manifest(inc, m)


def add(category: str, entry: str, consumer: str, names: str, fragment: str, *, input_rel: str | None = None,
        args: list[str] | None = None) -> None:
    rec = {"id": f"{category}/{entry}", "consumer": consumer, "input": input_rel or f"{category}/{entry}/inc",
           "names": names, "fragment": fragment}
    if args:
        rec["args"] = args
    ENTRIES.append(rec)


def new_incident(category: str, entry: str, tables: dict[str, pa.Table] | None = None) -> Path:
    """A valid incident, then `tables` written over it as they are (contract types, no checks)."""
    inc = good_incident(OUT / category / entry / "inc")
    if tables:
        m = read_manifest(inc)
        for name, table in tables.items():
            table = T.conform(name, table)
            f = inc / "tables" / f"{name}.parquet"
            raw_table(f, table)
            m["tables"][name] = {"path": f"tables/{name}.parquet", "rows": table.num_rows, "digest": hash_file(f)}
        write_manifest(inc, m)
    return inc


def rel(p: Path) -> str:
    return os.path.relpath(p, OUT)


# ---------------------------------------------------------------- categories

def parquet_truncated() -> None:
    cat = "parquet_truncated"
    for name in ("steps", "kernels"):
        for cut in ("0", "1", "4", "8", "16", "64", "half", "-1", "-4", "-8", "-12"):
            inc = new_incident(cat, f"{name}-cut{cut}")
            f = inc / "tables" / f"{name}.parquet"
            data = f.read_bytes()
            n = len(data) // 2 if cut == "half" else (len(data) + int(cut) if cut.startswith("-") else int(cut))
            f.write_bytes(data[:n])
            redigest(inc, name)
            add(cat, f"{name}-cut{cut}", "ingest", rel(f), "not a readable Parquet file")


def _flip(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


def parquet_corrupted() -> None:
    cat = "parquet_corrupted"
    for name in ("steps", "kernels"):
        damage = {
            "tail-magic": lambda d: _flip(d, len(d) - 4, b"PAR0"),
            "footer-len-huge": lambda d: _flip(d, len(d) - 8, struct.pack("<I", 0x7FFFFFFF)),
            "footer-len-zero": lambda d: _flip(d, len(d) - 8, struct.pack("<I", 0)),
            "footer-len-past-start": lambda d: _flip(d, len(d) - 8, struct.pack("<I", len(d))),
            "footer-garbage": lambda d: _flip(d, len(d) - 8 - 40, b"\xff" * 32),
            "json-text": lambda d: b'{"not": "parquet"}\n',
            "csv-text": lambda d: b"step_id,thread_id,start_ns,end_ns\n0,1,2,3\n",
            "zeros": lambda d: b"\x00" * len(d),
            "gzip-of-itself": lambda d: gzip.compress(d, mtime=0),
            "doubled-magic-only": lambda d: b"PAR1PAR1",
        }
        for label, fn in damage.items():
            inc = new_incident(cat, f"{name}-{label}")
            f = inc / "tables" / f"{name}.parquet"
            f.write_bytes(fn(f.read_bytes()))
            redigest(inc, name)
            add(cat, f"{name}-{label}", "ingest", rel(f), "not a readable Parquet file")
    # Well-formed Parquet that breaks the table contract.
    contract = {
        "kernels-as-steps": (pa.table({"name": ["k"], "device": [0]}), "lacks required column"),
        "start-as-text": (pa.table({"step_id": [0], "thread_id": [1], "start_ns": ["soon"], "end_ns": [5]}), "cannot be int64"),
        "null-step-id": (pa.table({"step_id": pa.array([None, 1], pa.int64()), "thread_id": [1, 1], "start_ns": [0, 10], "end_ns": [5, 15]}), "null"),
        "no-columns": (pa.table({"x": pa.array([], pa.int8())}).drop_columns(["x"]), "lacks required column"),
        "float-overflow": (pa.table({"step_id": [0], "thread_id": [1], "start_ns": [1e30], "end_ns": [2e30]}), "cannot be int64"),
        "struct-column": (pa.table({"step_id": [{"a": 1}], "thread_id": [1], "start_ns": [0], "end_ns": [5]}), "cannot be int64"),
    }
    for label, (table, frag) in contract.items():
        inc = new_incident(cat, f"contract-{label}")
        f = inc / "tables" / "steps.parquet"
        raw_table(f, table)
        m = read_manifest(inc)
        m["tables"]["steps"]["rows"] = table.num_rows
        write_manifest(inc, m)
        redigest(inc, "steps")
        add(cat, f"contract-{label}", "ingest", rel(f), frag)


def manifest_schema() -> None:
    cat = "manifest_schema"
    required = ["schema_version", "kind", "incident_id", "created_unix_ns", "reason", "clock", "sources", "tables", "tables_version"]

    def case(label, mutate, frag, raw: bytes | None = None):
        inc = new_incident(cat, label)
        if raw is not None:
            (inc / "manifest.json").write_bytes(raw)
        else:
            m = read_manifest(inc)
            m = mutate(m) or m
            write_manifest(inc, m)
        add(cat, label, "ingest", rel(inc / "manifest.json"), frag)

    for key in required:
        case(f"missing-{key}", lambda m, k=key: m.pop(k) and None, f"'{key}' is a required property")
    wrong = {"schema_version": 2, "kind": "snapshot", "incident_id": "../escape", "created_unix_ns": -1,
             "reason": 5, "clock": "monotonic", "sources": [], "tables": [], "tables_version": 0}
    for key, val in wrong.items():
        frag = "newest supported: 1" if key == "schema_version" else "violates incident_manifest schema"
        case(f"wrong-{key}", lambda m, k=key, v=val: m.__setitem__(k, v), frag)
    more = {
        "extra-key": (lambda m: m.__setitem__("exec", "rm -rf /"), "Additional properties"),
        "clock-host-gpu": (lambda m: m["clock"].__setitem__("host", "gpu"), "violates incident_manifest schema"),
        "clock-extra": (lambda m: m["clock"].__setitem__("offset", 3), "Additional properties"),
        "source-bad-status": (lambda m: m["sources"]["kernels"].__setitem__("status", "maybe"), "violates incident_manifest schema"),
        "source-no-reason": (lambda m: m["sources"]["nvml"].__setitem__("reason", ""), "violates incident_manifest schema"),
        "table-no-digest": (lambda m: m["tables"]["steps"].pop("digest") and None, "'digest' is a required property"),
        "table-no-path": (lambda m: m["tables"]["steps"].pop("path") and None, "'path' is a required property"),
        "table-rows-negative": (lambda m: m["tables"]["steps"].__setitem__("rows", -3), "violates incident_manifest schema"),
        "table-rows-float": (lambda m: m["tables"]["steps"].__setitem__("rows", 6.5), "violates incident_manifest schema"),
        "table-digest-short": (lambda m: m["tables"]["steps"].__setitem__("digest", "abc"), "does not match"),
        "table-digest-upper": (lambda m: m["tables"]["steps"].__setitem__("digest", m["tables"]["steps"]["digest"].upper()), "does not match"),
        "table-unknown-name": (lambda m: m["tables"].__setitem__("secrets", dict(m["tables"]["steps"])), "unknown table"),
        "table-entry-extra": (lambda m: m["tables"]["steps"].__setitem__("exec", "x"), "Additional properties"),
        "artifact-bad-role": (lambda m: m["artifacts"].append({"role": "daemon", "path": "/x", "digest": "0" * 64, "size": 1}), "violates incident_manifest schema"),
        "artifact-no-digest": (lambda m: m["artifacts"].append({"role": "input", "path": "/x", "size": 1}), "'digest' is a required property"),
        "workload-shell-string": (lambda m: m.__setitem__("workload", {"argv": "rm -rf / ; echo", "cwd": "/", "env": {}}), "violates incident_manifest schema"),
        "workload-empty-argv": (lambda m: m.__setitem__("workload", {"argv": [], "cwd": "/", "env": {}}), "violates incident_manifest schema"),
        "workload-env-number": (lambda m: m.__setitem__("workload", {"argv": ["x"], "cwd": "/", "env": {"A": 1}}), "violates incident_manifest schema"),
        "ranks-negative": (lambda m: m.__setitem__("ranks", [-1]), "violates incident_manifest schema"),
        "window-negative": (lambda m: m.__setitem__("window", {"start_ns": -5, "end_ns": 3}), "violates incident_manifest schema"),
        "incident-id-slash": (lambda m: m.__setitem__("incident_id", "a/b"), "does not match"),
        "incident-id-empty": (lambda m: m.__setitem__("incident_id", ""), "does not match"),
    }
    for label, (fn, frag) in more.items():
        case(label, fn, frag)
    raw = {
        "empty": (b"", "not valid JSON"),
        "truncated": (b'{"schema_version": 1, "kind": "incident_manif', "not valid JSON"),
        "array": (b"[1, 2, 3]\n", "expected a JSON object"),
        "string": (b'"manifest"\n', "expected a JSON object"),
        "nan": (b'{"schema_version": NaN}', "not valid JSON"),
        "infinity": (b'{"created_unix_ns": Infinity}', "not valid JSON"),
        "latin1": ('{"reason": "caf\xe9"}'.encode("latin-1"), "not UTF-8"),
        "utf16": ('{"reason": "x"}'.encode("utf-16"), "not UTF-8"),
        "deep-nesting": (b'{"trigger": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "not valid JSON"),
        "binary": (bytes(range(256)), "not UTF-8"),
        "trailing-garbage": (b'{"kind": "incident_manifest"} rm -rf /', "not valid JSON"),
    }
    for label, (data, frag) in raw.items():
        case(f"raw-{label}", None, frag, raw=data)
    # A directory where the manifest should be, and no manifest at all.
    inc = new_incident(cat, "manifest-is-dir")
    (inc / "manifest.json").unlink()
    (inc / "manifest.json").mkdir()
    (inc / "manifest.json" / ".keep").write_bytes(b"")  # git keeps no empty directories
    add(cat, "manifest-is-dir", "ingest", rel(inc / "manifest.json"), "is a directory")
    inc = new_incident(cat, "manifest-missing")
    (inc / "manifest.json").unlink()
    add(cat, "manifest-missing", "ingest", rel(inc / "manifest.json"), "record not found")


def wrong_digest() -> None:
    cat = "wrong_digest"
    for name in ("steps", "kernels"):
        for label, fn in {
            "one-char": lambda d: ("0" if d[0] != "0" else "1") + d[1:],
            "other-table": None,
            "zeros": lambda d: "0" * 64,
            "of-empty": lambda d: hash_bytes(b""),
        }.items():
            inc = new_incident(cat, f"{name}-{label}")
            m = read_manifest(inc)
            other = "kernels" if name == "steps" else "steps"
            m["tables"][name]["digest"] = m["tables"][other]["digest"] if fn is None else fn(m["tables"][name]["digest"])
            write_manifest(inc, m)
            add(cat, f"{name}-{label}", "ingest", rel(inc / "tables" / f"{name}.parquet"), "digest mismatch")
        # Right digest, wrong row count.
        inc = new_incident(cat, f"{name}-rows")
        m = read_manifest(inc)
        m["tables"][name]["rows"] += 1
        write_manifest(inc, m)
        add(cat, f"{name}-rows", "ingest", rel(inc / "tables" / f"{name}.parquet"), "rows")
        # Table swapped for another valid table of the same kind, digest unchanged.
        inc = new_incident(cat, f"{name}-swapped")
        T.write_table(inc / "tables" / f"{name}.parquet", name, BUILDERS[name](3))
        add(cat, f"{name}-swapped", "ingest", rel(inc / "tables" / f"{name}.parquet"), "digest mismatch")
    # Artifacts named by digest that are nowhere.
    for role in ("source", "input", "patch", "binary", "library"):
        inc = new_incident(cat, f"artifact-{role}")
        m = read_manifest(inc)
        # Stored roles: a relative name inside the working directory (a declared root), absent;
        # environment roles are verified in place and may be anywhere.
        path = f"missing-{role}.bin" if role in ("source", "input", "patch") else f"/nonexistent/stallcase-corpus/{role}.bin"
        m["artifacts"] = [{"role": role, "path": path, "relpath": None, "digest": hash_bytes(role.encode()), "size": 3}]
        write_manifest(inc, m)
        add(cat, f"artifact-{role}", "ingest", path, "missing artifact")
    # Results trees whose store or records are damaged: `stallcase verify`.
    _verify_trees(cat)


def _good_results(dest: Path) -> tuple[Path, dict]:
    """A results tree with a valid snapshot record and its store objects."""
    from workflow_lib.snapshot.build import ingest

    inc = good_incident(dest.parent / "src-inc" / "inc")
    rec = ingest(inc, dest, dest / "inc" / "snapshot.json")
    shutil.rmtree(dest.parent / "src-inc")
    return dest, rec


def _obj(root: Path, digest: str) -> Path:
    return root / "cas" / "blake3" / digest[:2] / digest[2:]


def _verify_trees(cat: str) -> None:
    def tree(label):
        root, rec = _good_results(OUT / cat / f"verify-{label}" / "results")
        return root, rec

    def store_case(label, damage, frag):
        root, rec = tree(label)
        victim = _obj(root, rec["tables"]["steps"]["digest"])
        damage(victim, root)
        add(cat, f"verify-{label}", "verify", rel(victim), frag, input_rel=rel(root))

    store_case("flipped-byte", lambda p, r: p.write_bytes(_flip(p.read_bytes(), 10, b"\xff")), "content hashes to")
    store_case("truncated", lambda p, r: p.write_bytes(p.read_bytes()[:-7]), "content hashes to")
    store_case("emptied", lambda p, r: p.write_bytes(b""), "content hashes to")
    store_case("appended", lambda p, r: p.write_bytes(p.read_bytes() + b"\n"), "content hashes to")

    root, rec = tree("missing-object")
    victim = _obj(root, rec["tables"]["kernels"]["digest"])
    victim.unlink()
    add(cat, "verify-missing-object", "verify", rel(root / "inc" / "snapshot.json"), "missing from the store", input_rel=rel(root))

    root, rec = tree("misnamed-object")
    bad = root / "cas" / "blake3" / "zz" / ("q" * 62)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"who put this here")
    add(cat, "verify-misnamed-object", "verify", rel(bad), "not a blake3 store object name", input_rel=rel(root))

    root, rec = tree("nested-object")
    d = _obj(root, rec["tables"]["steps"]["digest"])
    nested = d.parent / "extra" / d.name
    nested.parent.mkdir()
    nested.write_bytes(b"x")
    add(cat, "verify-nested-object", "verify", rel(nested), "not a blake3 store object name", input_rel=rel(root))

    root, rec = tree("symlinked-object")
    victim = _obj(root, rec["tables"]["steps"]["digest"])
    data = victim.read_bytes()
    victim.unlink()
    (root.parent / "elsewhere.parquet").write_bytes(data)
    victim.symlink_to(os.path.relpath(root.parent / "elsewhere.parquet", victim.parent))
    add(cat, "verify-symlinked-object", "verify", rel(victim), "not a regular file", input_rel=rel(root))

    def record_case(label, damage, frag):
        root, rec = tree(f"record-{label}")
        p = root / "inc" / "snapshot.json"
        damage(p)
        add(cat, f"verify-record-{label}", "verify", rel(p), frag, input_rel=rel(root))  # noqa: B023

    def edit(fn):
        def go(p):
            r = json.loads(p.read_text())
            fn(r)
            p.write_text(json.dumps(r, indent=1))
        return go

    record_case("truncated", lambda p: p.write_bytes(p.read_bytes()[:-20]), "not valid JSON")
    record_case("not-utf8", lambda p: p.write_bytes(p.read_bytes().replace(b'"manual"', b'"m\xe9nual"')), "not UTF-8")
    record_case("missing-field", edit(lambda r: r.pop("tables")), "'tables' is a required property")
    record_case("bad-digest-format", edit(lambda r: r.__setitem__("manifest_digest", "xyz")), "violates snapshot schema")
    record_case("extra-field", edit(lambda r: r.__setitem__("run", ["sh", "-c", "id"])), "Additional properties")
    record_case("wrong-version", edit(lambda r: r.__setitem__("schema_version", 99)), "newest supported: 1")
    record_case("nan", lambda p: p.write_bytes(p.read_bytes().replace(b'"created_unix_ns": ', b'"created_unix_ns": NaN, "x": ')), "not valid JSON")


PATHS = {
    "dotdot": "../outside.parquet",
    "dotdot-deep": "tables/../../outside.parquet",
    "dot-dotdot": "./../outside.parquet",
    "tables-dot-dotdot": "tables/./../../outside.parquet",
    "dotdot-inside": "tables/../tables/steps.parquet",
    "dotdot-only": "..",
    "abs-etc-passwd": "/etc/passwd",
    "abs-dev-zero": "/dev/zero",
    "abs-proc-environ": "/proc/self/environ",
    "abs-double-slash": "//etc/passwd",
    "abs-tmp": "/tmp/stallcase-corpus-outside.parquet",
    "nul-byte": "tables/steps.parquet\u0000.txt",
    "backslash-dotdot": "..\\outside.parquet",
    "empty-path": "",
    "dir-itself": "tables",
}


def path_escape() -> None:
    cat = "path_escape"
    for label, path in PATHS.items():
        inc = new_incident(cat, label)
        T.write_table(inc.parent / "outside.parquet", "steps", _steps())
        m = read_manifest(inc)
        m["tables"]["steps"]["path"] = path
        write_manifest(inc, m)
        if ".." in Path(path).parts or os.path.isabs(path):
            names, frag = rel(inc / "manifest.json"), "escapes the incident directory"
        elif "\u0000" in path:
            names, frag = rel(inc / "manifest.json"), "NUL"
        elif label in ("empty-path", "dir-itself"):
            names, frag = rel(inc / path) if path else rel(inc), "is a directory"
        else:
            names, frag = rel(inc / path) if path else rel(inc), "missing"
        add(cat, label, "ingest", names, frag)
    # Symlinks: the manifest is honest, the file system is not.
    links = {
        "table-to-outside": ("tables/steps.parquet", "../../outside.parquet"),
        "table-to-etc": ("tables/steps.parquet", "/etc/passwd"),
        "table-to-dev-zero": ("tables/steps.parquet", "/dev/zero"),
        "table-loop": ("tables/steps.parquet", "steps.parquet"),
        "table-dangling": ("tables/steps.parquet", "../../nowhere.parquet"),
        "tables-dir-outside": ("tables", "../elsewhere"),
        "manifest-outside": ("manifest.json", "../outside-manifest.json"),
        "manifest-to-etc": ("manifest.json", "/etc/passwd"),
    }
    for label, (member, target) in links.items():
        inc = new_incident(cat, f"symlink-{label}")
        here = inc / member
        if member == "tables":
            shutil.copytree(here, inc.parent / "elsewhere")
            shutil.rmtree(here)
        elif member == "manifest.json":
            shutil.copy(here, inc.parent / "outside-manifest.json")
            here.unlink()
        else:
            shutil.copy(here, inc.parent / "outside.parquet")
            here.unlink()
        here.symlink_to(target)
        names = rel(inc / "manifest.json") if member != "tables/steps.parquet" or label != "table-loop" else rel(inc / "manifest.json")
        frag = {"table-loop": "symlink loop", "table-dangling": "resolves outside"}.get(label, "outside the incident directory")
        add(cat, f"symlink-{label}", "ingest", names, frag)


def duplicate_steps() -> None:
    cat = "duplicate_steps"
    cases = {
        "pair": ([0, 1, 1, 2], None), "first-last": ([3, 1, 2, 3], None), "all-same": ([5, 5, 5, 5], None),
        "rank0": ([0, 1, 1, 2], 0), "rank3": ([0, 0, 1, 2], 3), "zero-ids": ([0, 0, 0, 0], 1),
        "negative-ids": ([-1, -1, 0, 1], None), "big-ids": ([2**62, 2**62, 1, 2], None),
    }
    for label, (ids, rank) in cases.items():
        n = len(ids)
        starts = [1_000_000 + i * 1_000_000 for i in range(n)]
        steps = pa.table({"step_id": ids, "thread_id": [7 + i for i in range(n)], "start_ns": starts,
                          "end_ns": [s + 900_000 for s in starts], "rank": pa.array([rank] * n, pa.int32())})
        inc = new_incident(cat, label, {"steps": steps})
        add(cat, label, "ingest", rel(inc / "tables" / "steps.parquet"), "duplicate step_id")
    # Same step on two threads of one rank is still one step id twice.
    steps = pa.table({"step_id": [0, 0], "thread_id": [1, 2], "start_ns": [10, 20], "end_ns": [15, 25],
                      "rank": pa.array([0, 0], pa.int32())})
    inc = new_incident(cat, "two-threads", {"steps": steps})
    add(cat, "two-threads", "ingest", rel(inc / "tables" / "steps.parquet"), "duplicate step_id")
    # Many steps, one duplicate at the very end.
    base = _steps(500)
    ids = list(range(499)) + [17]
    steps = base.set_column(0, "step_id", pa.array(ids, pa.int64()))
    inc = new_incident(cat, "late-duplicate", {"steps": steps})
    add(cat, "late-duplicate", "ingest", rel(inc / "tables" / "steps.parquet"), "duplicate step_id")


def timestamps() -> None:
    cat = "timestamps"
    for name in ("steps", "spans", "kernels", "memcpy", "runtime_api"):
        t = BUILDERS[name]()
        n = t.num_rows
        s = t["start_ns"].to_pylist()
        e = t["end_ns"].to_pylist()
        variants = {
            "reversed-first": (s, [s[0] - 1] + e[1:], "end_ns before start_ns"),
            "reversed-last": (s, e[:-1] + [s[-1] - 1_000], "end_ns before start_ns"),
            "reversed-all": (e, s, "end_ns before start_ns"),
            "negative-start": ([-5_000] + s[1:], e, "negative start_ns"),
            "int64-min": ([-(2**63)] + s[1:], e, "negative start_ns"),
        }
        for label, (ss, ee, frag) in variants.items():
            table = t.set_column(t.column_names.index("start_ns"), "start_ns", pa.array(ss, pa.int64()))
            table = table.set_column(table.column_names.index("end_ns"), "end_ns", pa.array(ee, pa.int64()))
            tabs = {"steps": _steps(), name: table} if name != "steps" else {"steps": table}
            inc = new_incident(cat, f"{name}-{label}", tabs)
            add(cat, f"{name}-{label}", "ingest", rel(inc / "tables" / f"{name}.parquet"), frag)
        assert n > 1
    # Point samples on the host timeline cannot be before its origin either.
    samples = {
        "nvml": pa.table({"device": [0, 0], "ts_ns": [-1_000, 2_000], "metric": ["sm_clock_mhz"] * 2,
                          "value": [1980.0, 1980.0], "source": ["poll"] * 2}),
        "sched": pa.table({"ts_ns": [1_000, -2_000], "thread_id": [7, 7], "state": ["R", "S"]}),
        "clock_sync": pa.table({"source": ["cupti"], "ts_host_ns": [-5], "offset_ns": [3], "uncertainty_ns": [1]}),
    }
    for name, table in samples.items():
        inc = new_incident(cat, f"{name}-negative-ts", {"steps": _steps(), name: table})
        add(cat, f"{name}-negative-ts", "ingest", rel(inc / "tables" / f"{name}.parquet"), "negative")
    inc = new_incident(cat, "clock_sync-negative-uncertainty", {"steps": _steps(), "clock_sync": pa.table(
        {"source": ["cupti"], "ts_host_ns": [5], "offset_ns": [3], "uncertainty_ns": [-1]})})
    add(cat, "clock_sync-negative-uncertainty", "ingest", rel(inc / "tables" / "clock_sync.parquet"), "negative uncertainty_ns")


def clocks_backwards() -> None:
    """A host clock that jumps back shows as one thread's steps overlapping or running backwards."""
    cat = "clock_backwards"
    cases = {
        "end-back-by-1ns": ([0, 1, 2], [0, 100, 199], [100, 200, 199]),
        "jump-back-1s": ([0, 1, 2, 3], [2_000_000_000, 2_100_000_000, 1_100_000_000, 1_200_000_000],
                         [2_050_000_000, 2_150_000_000, 1_150_000_000, 1_250_000_000]),
        "reverse-order": ([0, 1, 2], [300, 200, 100], [350, 250, 150]),
        "same-end-then-back": ([0, 1, 2], [100, 150, 140], [150, 150, 149]),
        "nested": ([0, 1], [100, 110], [200, 150]),
        "last-step-back": ([0, 1, 2, 3, 4], [0, 10, 20, 30, 5], [9, 19, 29, 39, 8]),
    }
    for label, (ids, s, e) in cases.items():
        for rank in (None, 2):
            n = len(ids)
            steps = pa.table({"step_id": ids, "thread_id": [7] * n, "start_ns": s, "end_ns": e, "rank": pa.array([rank] * n, pa.int32())})
            entry = f"{label}-rank{'none' if rank is None else rank}"
            inc = new_incident(cat, entry, {"steps": steps})
            add(cat, entry, "ingest", rel(inc / "tables" / "steps.parquet"), "clock went backwards")


# ---------------------------------------------------------------- kineto traces

def _trace(events, **meta) -> dict:
    d = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": events}
    d.update(meta)
    return d


def _good_events() -> list[dict]:
    ev = []
    for i in range(3):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": 100.0 + i * 100, "dur": 90.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 110.0 + i * 100, "dur": 50.0,
                   "args": {"device": 0, "stream": 7, "correlation": i}})
    return ev


def kineto() -> None:
    cat = "kineto_hostile"
    d = OUT / cat
    d.mkdir(parents=True, exist_ok=True)

    def put(label: str, data: bytes, frag: str, gz: bool = False) -> None:
        f = d / (label + (".json.gz" if gz else ".json"))
        f.write_bytes(gzip.compress(data, mtime=0) if gz else data)
        add(cat, label, "import_kineto", rel(f), frag, input_rel=rel(f))

    j = lambda obj: json.dumps(obj).encode()  # noqa: E731
    put("empty", b"", "")
    put("whitespace", b"   \n\t  ", "")
    put("not-json", b"this is not a trace", "")
    put("binary", bytes(range(256)) * 4, "")
    # top-level-array and no-steps are valid since issue 14 (the Chrome JSON-array format; a trace
    # without ProfilerStep#N is diagnosed over its window): tests/test_kineto_traces_as_users_have_them.py
    put("top-level-string", b'"traceEvents"', "")
    put("top-level-null", b"null", "")
    put("trace-events-object", j({"traceEvents": {"a": 1}}), "")
    put("trace-events-string", j({"traceEvents": "x"}), "")
    put("no-trace-events", j({"schemaVersion": 1}), "")
    put("events-not-objects", j(_trace([1, 2, 3])), "")
    put("ts-string", j(_trace([dict(e, ts="soon") for e in _good_events()])), "")
    put("ts-missing", j(_trace([{k: v for k, v in e.items() if k != "ts"} for e in _good_events()])), "")
    put("ts-nan", j(_trace(_good_events())).replace(b'"ts": 100.0', b'"ts": NaN'), "")
    put("ts-infinity", j(_trace(_good_events())).replace(b'"ts": 100.0', b'"ts": Infinity'), "")
    put("ts-huge", j(_trace(_good_events())).replace(b'"ts": 100.0', b'"ts": 1e400'), "")
    put("ts-negative", j(_trace([dict(e, ts=-e["ts"] - 1e12) for e in _good_events()], baseTimeNanoseconds=0)), "negative")
    put("base-negative", j(_trace(_good_events(), baseTimeNanoseconds=-5)), "baseTimeNanoseconds")
    put("base-string", j(_trace(_good_events(), baseTimeNanoseconds="now")), "baseTimeNanoseconds")
    put("rank-negative", j(_trace(_good_events(), distributedInfo={"rank": -1})), "rank")
    put("rank-string", j(_trace(_good_events(), distributedInfo={"rank": "zero"})), "rank")
    put("truncated", j(_trace(_good_events()))[:-40], "")
    put("truncated-in-string", j(_trace(_good_events()))[:120], "")
    put("unterminated-array", j(_trace(_good_events()))[:-2], "")
    # Deep nesting: plain at a depth past any recursion limit, gzip at absurd depths.
    put("deep-array", b'{"traceEvents": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "")
    put("deep-array-gz", b'{"traceEvents": ' + b"[" * 500_000 + b"]" * 500_000 + b"}", "", gz=True)
    put("deep-object-in-event", b'{"traceEvents": [{"ph": "X", "args": ' + b'{"a":' * 3_000 + b"1" + b"}" * 3_000 + b"}]}", "")
    put("deep-object-in-event-gz", b'{"traceEvents": [{"ph": "X", "args": ' + b'{"a":' * 300_000 + b"1" + b"}" * 300_000 + b"}]}", "", gz=True)
    put("deep-metadata", b'{"deviceProperties": ' + b"[" * 5_000 + b"]" * 5_000 + b', "traceEvents": []}', "")
    put("deep-unclosed", b'{"traceEvents": [' + b"[" * 5_000, "")
    put("deep-unclosed-gz", b'{"traceEvents": [' + b"[" * 1_000_000, "", gz=True)
    put("latin1-name", j(_trace(_good_events())).replace(b"gemm", b"g\xe9mm"), "")
    put("utf16", json.dumps(_trace(_good_events())).encode("utf-16"), "")
    # Huge once decompressed, small on disk: 64 MiB of whitespace then garbage, and
    # 400k events (13 MB) none of which is a step.
    huge_ws = b'{"traceEvents": [' + b" " * (64 << 20) + b"oops"
    put("gzip-huge-whitespace", huge_ws, "", gz=True)
    huge_events = b'{"traceEvents": [' + b'{"ph": "i", "name": "x", "ts": 1},' * 400_000 + b'{"ph": "i"}]}'
    put("gzip-many-events-no-steps", huge_events, "", gz=True)
    put("gzip-truncated", gzip.compress(j(_trace(_good_events())), mtime=0)[:-30], "")
    f = d / "gzip-garbage.json.gz"
    f.write_bytes(b"\x1f\x8b" + b"\x00" * 64)
    add(cat, "gzip-garbage", "import_kineto", rel(f), "", input_rel=rel(f))
    f = d / "is-a-directory.json"
    f.mkdir(exist_ok=True)
    (f / ".keep").write_bytes(b"")
    add(cat, "is-a-directory", "import_kineto", rel(f), "directory", input_rel=rel(f))
    # Hostile incident ids for the output directory.
    good = d / "valid-trace.json"
    good.write_bytes(j(_trace(_good_events())))
    for label, iid in {"dotdot": "..", "escape": "../../etc", "slash": "a/b", "abs": "/tmp/x", "dot": ".", "dash": "-rf",
                       "empty": "", "long": "x" * 200, "newline": "a\nb", "nonutf8": "inc\udcff"}.items():
        add(cat, f"incident-id-{label}", "import_kineto", "incident", "invalid incident id", input_rel=rel(good), args=[f"--incident={iid}"])


# ---------------------------------------------------------------- pickles

def _pickles() -> dict[str, tuple[bytes, str]]:
    """Hand-assembled pickles that try to import or call; each would create PWNED if run."""
    import pickle

    out: dict[str, tuple[bytes, str]] = {}
    cmd = b"touch PWNED"
    # protocol 0: GLOBAL + REDUCE
    out["p0-os-system"] = (b"cos\nsystem\n(S'" + cmd + b"'\ntR.", "global")
    out["p0-posix-system"] = (b"cposix\nsystem\n(S'" + cmd + b"'\ntR.", "global")
    out["p0-subprocess"] = (b"csubprocess\ncheck_call\n((S'touch'\nS'PWNED'\nltR.", "global")
    out["p0-builtins-eval"] = (b"c__builtin__\neval\n(S'open(\"PWNED\",\"w\")'\ntR.", "global")
    out["p0-builtins-exec"] = (b"cbuiltins\nexec\n(S'open(\"PWNED\",\"w\")'\ntR.", "global")
    out["p0-inst"] = (b"(S'" + cmd + b"'\nios\nsystem\n.", "global")
    out["p0-global-only"] = (b"cos\nsystem\n.", "global")
    out["p0-nested-in-dict"] = (b"(dp0\nS'entries'\np1\ncos\nsystem\n(S'" + cmd + b"'\ntRs.", "global")
    # protocol 2: GLOBAL + NEWOBJ / BUILD
    out["p2-reduce"] = (b"\x80\x02cos\nsystem\nq\x00X\x0b\x00\x00\x00" + cmd + b"q\x01\x85q\x02Rq\x03.", "global")
    out["p2-newobj"] = (b"\x80\x02cbuiltins\nobject\n)\x81.", "global")
    out["p2-build-setstate"] = (b"\x80\x02ccollections\nOrderedDict\n)Rq\x00}b.", "global")
    out["p2-ext1"] = (b"\x80\x02\x82\x01.", "")
    out["p2-ext2"] = (b"\x80\x02\x83\x01\x00.", "")
    out["p2-ext4"] = (b"\x80\x02\x84\x01\x00\x00\x00.", "")
    out["p2-persid"] = (b"\x80\x02X\x03\x00\x00\x00abcQ.", "")
    out["p0-persid"] = (b"Pabc\n.", "")
    # protocol 4: STACK_GLOBAL
    out["p4-stack-global-system"] = (b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x0b" + cmd + b"\x85R.", "")
    out["p4-stack-global-eval"] = (b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c\x17open('PWNED','w')\x85R.", "")
    out["p4-getattr-chain"] = (b"\x80\x04\x8c\x08builtins\x8c\x07getattr\x93\x8c\x02os\x8c\x06system\x86R.", "")
    out["p4-newobj-ex"] = (b"\x80\x04\x8c\x08builtins\x8c\x06object\x93)}\x92.", "")
    out["p4-obj"] = (b"\x80\x04(\x8c\x08builtins\x8c\x06object\x93o.", "")
    out["p4-in-entries"] = (b"\x80\x04}\x8c\x07entries](\x8c\x02os\x8c\x06system\x93\x8c\x0b" + cmd + b"\x85Rae.", "")
    # protocol 5: out-of-band buffers
    out["p5-next-buffer"] = (b"\x80\x05\x97.", "")
    out["p5-readonly-buffer"] = (b"\x80\x05\x97\x98.", "")
    out["p5-bytearray8"] = (b"\x80\x05\x96\x03\x00\x00\x00\x00\x00\x00\x00abc.", "")
    # Containers outside the plain tree: sets, frozensets.
    out["p4-set"] = (pickle.dumps({1, 2, 3}, protocol=4), "")
    out["p4-frozenset"] = (pickle.dumps(frozenset({1}), protocol=4), "")
    out["p2-set-global"] = (pickle.dumps({1, 2}, protocol=2), "global")
    out["p4-complex"] = (pickle.dumps(complex(1, 2), protocol=4), "global")
    out["p4-range"] = (pickle.dumps(range(3), protocol=4), "global")
    # Malformed streams.
    out["truncated"] = (pickle.dumps({"version": "2.4", "entries": []}, protocol=4)[:-5], "")
    out["empty"] = (b"", "")
    out["no-stop"] = (b"\x80\x04]\x94", "")
    out["not-pickle"] = (b"this is text, not a pickle", "")
    out["bad-proto"] = (b"\x80\x09N.", "")
    out["huge-length"] = (b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", "")
    out["deep-lists"] = (b"\x80\x04" + b"]" * 5_000 + b"a" * 4_999 + b".", "")
    out["memo-get-missing"] = (b"\x80\x04h\x05.", "")
    out["not-a-dict"] = (pickle.dumps([1, 2, 3], protocol=4), "")
    out["json-not-pickle"] = (b'{"entries": []}', "")
    return out


def pickles() -> None:
    cat = "pickle_hostile"
    d = OUT / cat
    d.mkdir(parents=True, exist_ok=True)
    for label, (data, _hint) in _pickles().items():
        f = d / f"{label}.pkl"
        f.write_bytes(data)
        add(cat, label, "import_torch_fr", rel(f), "", input_rel=rel(f))


# ---------------------------------------------------------------- non-UTF-8 names

def nonutf8_names() -> None:
    cat = "nonutf8_names"
    base = OUT / cat
    base.mkdir(parents=True, exist_ok=True)
    odd = os.fsdecode(b"caf\xe9-\xff")  # not UTF-8: decodes with surrogate escapes
    # A trace file with a non-UTF-8 name and content that is not a trace.
    f = base / f"trace-{odd}.json"
    f.write_bytes(b"not a trace")
    add(cat, "kineto-file", "import_kineto", rel(f), "", input_rel=rel(f))
    f = base / f"dump-{odd}.pkl"
    f.write_bytes(b"cos\nsystem\n(S'touch PWNED'\ntR.")
    add(cat, "torch-fr-file", "import_torch_fr", rel(f), "", input_rel=rel(f))
    # An incident whose directory name is not UTF-8 (and so not a valid id).
    inc = good_incident(base / "dir-name" / "inc")
    inc = inc.rename(inc.parent / f"inc-{odd}")
    add(cat, "incident-dir-name", "ingest", rel(inc), "invalid incident id", input_rel=rel(inc))
    # Manifests naming a table file by a non-UTF-8 name (JSON escapes a lone surrogate).
    for label, damage in {"garbage": b"garbage", "missing": None}.items():
        inc = new_incident(cat, f"table-name-{label}")
        m = read_manifest(inc)
        name = f"tables/st{odd}.parquet"
        m["tables"]["steps"]["path"] = name
        write_manifest(inc, m)
        if damage is not None:
            (inc / name).write_bytes(damage)
        # A manifest can only name such a file through a lone surrogate: refused as not Unicode.
        add(cat, f"table-name-{label}", "ingest", rel(inc / "manifest.json"), "lone surrogate")
    # Manifest strings holding lone surrogates: valid JSON, not valid Unicode.
    for key in ("reason", "producer"):
        inc = new_incident(cat, f"lone-surrogate-{key}")
        m = read_manifest(inc)
        m[key] = f"x{odd}"
        write_manifest(inc, m)
        add(cat, f"lone-surrogate-{key}", "ingest", rel(inc / "manifest.json"), "surrogate")
    inc = new_incident(cat, "lone-surrogate-source")
    m = read_manifest(inc)
    m["sources"][f"src{odd}"] = {"status": "observed", "reason": None, "detail": {}}
    write_manifest(inc, m)
    add(cat, "lone-surrogate-source", "ingest", rel(inc / "manifest.json"), "surrogate")
    # Raw non-UTF-8 bytes inside the manifest.
    inc = new_incident(cat, "manifest-bytes")
    (inc / "manifest.json").write_bytes((inc / "manifest.json").read_bytes().replace(b'"manual"', b'"man\xffual"'))
    add(cat, "manifest-bytes", "ingest", rel(inc / "manifest.json"), "not UTF-8")
    # Store objects and records under non-UTF-8 names.
    root, rec = _good_results(base / "verify-object" / "results")
    bad = root / "cas" / "blake3" / "ab" / f"x{odd}"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"x")
    add(cat, "verify-object", "verify", rel(bad), "not a blake3 store object name", input_rel=rel(root))
    root, rec = _good_results(base / "verify-record" / "results")
    p = root / "inc" / f"plan-{odd}.json"
    p.write_bytes(b'{"kind": "plan", "schema_version": 1}')
    add(cat, "verify-record", "verify", rel(p), "violates plan schema", input_rel=rel(root))
    # Incidents directory checked by verify: a table named with non-UTF-8 bytes is missing.
    incs = base / "verify-incidents" / "incidents"
    inc = good_incident(incs / "inc")
    m = read_manifest(inc)
    m["tables"]["steps"]["path"] = f"tables/{odd}.parquet"
    write_manifest(inc, m)
    (inc / "tables" / "steps.parquet").rename(inc / "tables" / f"st-{odd}.parquet")
    (base / "verify-incidents" / "results").mkdir(parents=True, exist_ok=True)
    (base / "verify-incidents" / "results" / ".keep").write_bytes(b"")
    add(cat, "verify-incidents", "verify_incidents", rel(inc / "manifest.json"), "lone surrogate", input_rel=rel(incs))


def main(argv: list[str]) -> int:
    global OUT
    OUT = Path(argv[1]).resolve() if len(argv) > 1 else HERE
    for child in OUT.iterdir() if OUT.exists() else []:
        if child.is_dir() and not child.name.startswith("__"):
            shutil.rmtree(child)
    OUT.mkdir(parents=True, exist_ok=True)
    for gen in (parquet_truncated, parquet_corrupted, manifest_schema, wrong_digest, path_escape,
                duplicate_steps, timestamps, clocks_backwards, kineto, pickles, nonutf8_names):
        gen()
    import hardening  # issue 17's families (tests/corpus/hardening.py)

    hardening.generate(sys.modules[__name__])
    import round3  # issue 29's families (tests/corpus/round3.py)

    round3.generate(sys.modules[__name__])
    import nsys_hostile  # issue 36's hostile Nsight Systems exports (tests/corpus/nsys_hostile.py)

    nsys_hostile.generate(sys.modules[__name__])
    import round4  # issue 38's held-out families (tests/corpus/round4.py)

    round4.generate(sys.modules[__name__])
    # `stallcase diagnose` reads incident directories with the same reader: every ingest
    # entry except those only ingest checks (the directory name, artifacts by digest).
    for e in list(ENTRIES):
        if (e["consumer"] == "ingest" and "/artifact-" not in e["id"] and e["id"] != "nonutf8_names/incident-dir-name"
                and not any(k in e["id"] for k in ("id-differs", "artifact-twice"))):  # checked by ingest only
            ENTRIES.append(dict(e, id=e["id"] + "#diagnose", consumer="diagnose"))
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)), "duplicate corpus entry ids"
    (OUT / "expected.json").write_text(json.dumps({"entries": ENTRIES}, indent=1, ensure_ascii=True) + "\n")
    print(f"{len(ENTRIES)} entries in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
