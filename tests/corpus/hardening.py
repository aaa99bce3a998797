"""Corpus families of issue 17 (generate.py calls `generate(g)`): numbers, text, shape,
special files, sizes, amplification, store and outputs. Every input is small on disk;
FIFOs, sockets, sparse giants and links to devices are made at run time by the runner
(entry key `special`), since git cannot hold them. Entries with consumer `argv` run
`stallcase` with entry["argv"], where "{w}" is the entry's work directory.
"""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

G = None  # the generate module (helpers, OUT, add)


def _rel(p: Path) -> str:
    return G.rel(p)


def _file_entry(cat: str, label: str, name: str, data: bytes, consumer: str, frag: str, *, args=None,
                names: str | None = None, special=None) -> Path:
    d = G.OUT / cat / label
    d.mkdir(parents=True, exist_ok=True)
    f = d / name
    if data is not None:
        f.write_bytes(data)
    G.add(cat, label, consumer, names or _rel(f), frag, input_rel=_rel(f), args=args)
    if special:
        G.ENTRIES[-1]["special"] = special
    return f


def _ev(**kw) -> dict:
    e = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100.0, "dur": 90.0}
    e.update(kw)
    return e


def _kern(**kw) -> dict:
    e = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 110.0, "dur": 50.0,
         "args": {"device": 0, "stream": 7, "correlation": 1}}
    e.update(kw)
    return e


def _trace(events, **meta) -> bytes:
    d = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": events}
    d.update(meta)
    return json.dumps(d).encode()


def _dump(entries, **kw) -> dict:
    d = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}, "entries": entries}
    d.update(kw)
    return d


def _entry(**kw) -> dict:
    e = {"record_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1, "p2p_seq_id": 0,
         "profiling_name": "nccl:all_reduce", "time_created_ns": 1_700_000_000_000_000_000, "input_sizes": [[4]],
         "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "completed"}
    e.update(kw)
    return e


# ---------------------------------------------------------------- numbers

def numbers() -> None:
    cat = "h_numbers"
    big = {"2p63": 2**63, "2p64": 2**64, "2p70": 2**70, "401digits": int("1" * 401), "neg2p64": -(2**64)}
    for label, v in big.items():
        _file_entry(cat, f"kineto-base-{label}", "t.json",
                    _trace([_ev()], baseTimeNanoseconds=v), "import_kineto", "baseTimeNanoseconds")
    for label, v in {"true": True, "float": 1.5e18, "string": "1700000000"}.items():
        _file_entry(cat, f"kineto-base-{label}", "t.json",
                    _trace([_ev()], baseTimeNanoseconds=v), "import_kineto", "baseTimeNanoseconds")
    for label, v in {"2p31": 2**31, "2p40": 2**40, "2p63": 2**63, "true": True, "float": 1.0, "neg": -5}.items():
        _file_entry(cat, f"kineto-rank-{label}", "t.json",
                    _trace([_ev()], distributedInfo={"rank": v}), "import_kineto", "distributedInfo.rank")
    for label, v in {"2p63": 2**63, "2p64": 2**64, "30digits": 10**30}.items():
        _file_entry(cat, f"kineto-step-id-{label}", "t.json", _trace([_ev(name=f"ProfilerStep#{v}")]), "import_kineto", "step id")
    for field in ("ts", "dur", "pid", "tid"):
        for b in (True, False):
            _file_entry(cat, f"kineto-{field}-{str(b).lower()}", "t.json", _trace([_ev(), _kern(**{field: b})]),
                        "import_kineto", "boolean")
    for field in ("pid", "tid"):
        for label, v in {"2p64": 2**64, "2p70": 2**70, "neg2p64": -(2**64)}.items():
            _file_entry(cat, f"kineto-{field}-{label}", "t.json", _trace([_ev(), _kern(**{field: v})]), "import_kineto", field)
    for label, v in {"2p64": 2**64, "neg2p70": -(2**70)}.items():
        _file_entry(cat, f"kineto-correlation-{label}", "t.json",
                    _trace([_ev(), _kern(args={"device": 0, "stream": 7, "correlation": v})]), "import_kineto", "args.correlation")
    for c in ("kernel", "cpu_op", "cuda_runtime", "gpu_memcpy"):
        _file_entry(cat, f"kineto-negative-dur-{c}", "t.json",
                    _trace([_ev(), _kern(cat=c, name="cudaLaunchKernel" if c == "cuda_runtime" else "x", dur=-1.0)]),
                    "import_kineto", "negative dur")
    # flight-recorder dumps
    fr = {
        "p2p-seq-2p64": (_entry(p2p_seq_id=2**64), "p2p_seq_id"), "p2p-seq-2p70": (_entry(p2p_seq_id=2**70), "p2p_seq_id"),
        "p2p-seq-neg": (_entry(p2p_seq_id=-1), "p2p_seq_id"), "p2p-seq-true": (_entry(p2p_seq_id=True), "p2p_seq_id"),
        "record-id-2p63": (_entry(record_id=2**63), "record_id"), "record-id-true": (_entry(record_id=True), "record_id"),
        "record-id-neg": (_entry(record_id=-1), "record_id"), "seq-2p64": (_entry(collective_seq_id=2**64), "collective_seq_id"),
        "seq-float": (_entry(collective_seq_id=1.0), "collective_seq_id"), "time-2p64": (_entry(time_created_ns=2**64), "time_created_ns"),
        "time-true": (_entry(time_created_ns=True), "time_created_ns"), "duration-true": (_entry(duration_ms=True), "duration_ms"),
        "duration-neg": (_entry(duration_ms=-1.0), "duration_ms"), "duration-inf": (_entry(duration_ms=float("inf")), "duration_ms"),
    }
    for label, (e, frag) in fr.items():
        _file_entry(cat, f"fr-{label}", "nccl_trace_rank_0.pkl", pickle.dumps(_dump([e]), protocol=4), "import_torch_fr", frag)
    for label, v in {"2p31": 2**31, "2p40": 2**40, "true": True, "neg": -1}.items():
        _file_entry(cat, f"fr-rank-{label}", "nccl_trace_rank_0.pkl", pickle.dumps(_dump([_entry()], rank=v), protocol=4),
                    "import_torch_fr", "rank")
    _file_entry(cat, "fr-rank-in-name-2p40", f"nccl_trace_rank_{2**40}.pkl", pickle.dumps(_dump([_entry()]), protocol=4),
                "import_torch_fr", "rank in the file name")
    # manifests
    mcases = {
        "created-10p30": (lambda m: m.__setitem__("created_unix_ns", 10**30), "outside the int64 range"),
        "rows-2p64": (lambda m: m["tables"]["steps"].__setitem__("rows", 2**64), "outside the int64 range"),
        "unix-offset-2p70": (lambda m: m["clock"].__setitem__("unix_minus_host_ns", 2**70), "outside the int64 range"),
        "window-2p64": (lambda m: m.__setitem__("window", {"start_ns": 2**64, "end_ns": 2**64}), "outside the int64 range"),
        "window-reversed": (lambda m: m.__setitem__("window", {"start_ns": 10, "end_ns": 5}), "reversed"),
        "artifact-size-2p64": (lambda m: m["artifacts"].append({"role": "input", "path": "x", "relpath": None,
                                                                  "digest": "0" * 64, "size": 2**64}), "outside the int64 range"),
        "created-bool": (lambda m: m.__setitem__("created_unix_ns", True), "violates incident_manifest schema"),
    }
    _manifest_cases(cat, mcases)


def _manifest_cases(cat: str, cases: dict) -> None:
    for label, (fn, frag) in cases.items():
        inc = G.new_incident(cat, f"manifest-{label}")
        m = G.read_manifest(inc)
        fn(m)
        G.write_manifest(inc, m)
        G.add(cat, f"manifest-{label}", "ingest", _rel(inc / "manifest.json"), frag)


# ---------------------------------------------------------------- text

def text() -> None:
    cat = "h_text"
    for field in ("name", "cat", "ph"):
        e = _ev(cat="cpu_op", name="op")
        e[field] = e[field] + "\ud800"
        _file_entry(cat, f"kineto-surrogate-{field}", "t.json", _trace([_ev(), e]), "import_kineto", "lone surrogate")
    _file_entry(cat, "kineto-unicode-digit-step", "t.json", _trace([_ev(name="ProfilerStep#\u00b2")]), "import_kineto",
                "no step spans")
    for label, (e, frag) in {
        "profiling-name": (_entry(profiling_name="nccl:all_reduce\ud800"), "lone surrogate"),
        "state": (_entry(state="completed\udcff"), "lone surrogate"),
        "pg-name": (_entry(process_group=["0\ud800", "default_pg"]), "lone surrogate"),
        "pg-desc": (_entry(process_group=["0", "default\udcff"]), "lone surrogate"),
    }.items():
        _file_entry(cat, f"fr-surrogate-{label}", "nccl_trace_rank_0.pkl", pickle.dumps(_dump([e]), protocol=4),
                    "import_torch_fr", frag)
    good = _trace([_ev(), _kern()])
    ids = {"trailing-newline": "demo\n", "trailing-crlf": "demo\r\n", "leading-tab": "\tdemo", "accented": "d\u00e9mo",
           "fullwidth": "\uff44emo", "space": "de mo", "nul": "de\x00mo", "dotdot-inside": "a..b", "too-long": "a" * 129,
           "star": "dem*", "semicolon": "x;rm"}
    for label, iid in ids.items():
        _file_entry(cat, f"incident-id-{label}", "t.json", good, "import_kineto", "invalid incident id", names="incident",
                    args=[f"--incident={iid}"])
    # configs (stallcase check-config)
    for label, data, frag in [
        ("binary", b"\xff\xfe\x00\x01binary", "not UTF-8"),
        ("nul", b"incident: de\x00mo\n", "NUL"),
        ("surrogate", b'incident: "demo\\udcff"\n', "lone surrogate"),
        ("env-key-equals", b'candidate: {env: {"A=B": "1"}}\n', "not an environment variable name"),
        ("env-key-empty", b'candidate: {env: {"": "1"}}\n', "not an environment variable name"),
        ("env-value-nul", b'candidate: {env: {"A": "x\\0y"}}\n', "NUL"),
        ("metric-no-group", b'trials: {metric: {source: stdout_regex, regex: "step_time=[0-9.]+"}}\n', "has no group"),
        ("metric-backref", b'trials: {metric: {source: stdout_regex, regex: "(a)\\\\1"}}\n', "trials.metric.regex"),
        ("not-yaml", b"a: [unclosed\n", "not valid YAML"),
    ]:
        _file_entry(cat, f"config-{label}", "c.yaml", data, "check_config", frag)
    mcases = {
        "id-trailing-newline": (lambda m: m.__setitem__("incident_id", "inc\n"), "invalid incident_id"),
        "id-differs-from-dir": (lambda m: m.__setitem__("incident_id", "other"), "differs from its directory"),
        "artifact-path-surrogate": (lambda m: m["artifacts"].append({"role": "input", "path": "a\udcff", "relpath": None,
                                                                       "digest": "0" * 64, "size": 1}), "lone surrogate"),
    }
    _manifest_cases(cat, mcases)


# ---------------------------------------------------------------- shape

def shape() -> None:
    cat = "h_shape"
    ev = json.dumps(_ev())
    for label, data, frag in [
        ("two-trace-events", f'{{"traceEvents": [{ev}], "traceEvents": [{ev}]}}'.encode(), "appears twice"),
        ("two-trace-events-empty-first", f'{{"traceEvents": [], "traceEvents": [{ev}]}}'.encode(), "appears twice"),
        ("duplicate-meta-key", f'{{"distributedInfo": {{"rank": 0}}, "distributedInfo": {{"rank": 1}}, "traceEvents": [{ev}]}}'.encode(), "appears twice"),
        ("text-after-root", _trace([_ev()]) + b" garbage", "text after the JSON object"),
        ("second-root", _trace([_ev()]) + b"\n" + _trace([_ev()]), "text after the JSON object"),
        ("nul-after-root", _trace([_ev()]) + b"\x00", "text after the JSON object"),
        ("array-after-root", _trace([_ev()]) + b"[]", "text after the JSON object"),
    ]:
        _file_entry(cat, f"kineto-{label}", "t.json", data, "import_kineto", frag)
    _file_entry(cat, "kineto-text-after-root-gz", "t.json.gz", gzip.compress(_trace([_ev()]) + b" {}", mtime=0),
                "import_kineto", "text after the JSON object")
    for label, (e, frag) in {
        "dtypes-int": (_entry(input_dtypes=5), "input_dtypes"), "dtypes-str": (_entry(input_dtypes="Float"), "input_dtypes"),
        "dtypes-dict": (_entry(output_dtypes={"a": 1}), "output_dtypes"), "dtypes-ints": (_entry(input_dtypes=[1, 2]), "input_dtypes"),
        "null-entry": (None, "entry 0"), "entry-list": ([1, 2], "entry 0"), "pg-one": (_entry(process_group=["0"]), "process_group"),
        "pg-ints": (_entry(process_group=[0, 1]), "process_group"), "sizes-str": (_entry(input_sizes="[[4]]"), "input_sizes"),
    }.items():
        _file_entry(cat, f"fr-{label}", "nccl_trace_rank_0.pkl", pickle.dumps(_dump([e]), protocol=4), "import_torch_fr", frag)
    mcases = {
        "tables-version-2": (lambda m: m.__setitem__("tables_version", 2), "newest supported: 1"),
        "tables-version-99": (lambda m: m.__setitem__("tables_version", 99), "newest supported: 1"),
        "schema-version-2p70": (lambda m: m.__setitem__("schema_version", 2**70), "newest supported: 1"),
        "same-table-file-twice": (lambda m: m["tables"].__setitem__("spans", dict(m["tables"]["steps"])), "name the same file"),
        "same-table-file-dot": (lambda m: m["tables"].__setitem__("spans", dict(m["tables"]["steps"], path="tables/./steps.parquet")),
                                "name the same file"),
        "artifact-twice": (lambda m: m.__setitem__("artifacts", [{"role": "binary", "path": "/bin/sh", "relpath": None,
                                                                   "digest": "0" * 64, "size": 1}] * 2), "listed twice"),
    }
    _manifest_cases(cat, mcases)


# ---------------------------------------------------------------- special files and paths

def special() -> None:
    cat = "h_special"
    for consumer, name in (("import_kineto", "t.json"), ("import_torch_fr", "nccl_trace_rank_0.pkl")):
        short = consumer.split("_")[-1]
        for kind, frag in (("fifo", "FIFO"), ("socket", "socket")):
            d = G.OUT / cat / f"{short}-{kind}"
            d.mkdir(parents=True, exist_ok=True)
            (d / ".keep").write_bytes(b"")
            f = d / name
            G.add(cat, f"{short}-{kind}", consumer, _rel(f), frag, input_rel=_rel(f))
            G.ENTRIES[-1]["special"] = [{"path": _rel(f), "kind": kind}]
        for dev in ("zero", "urandom", "null", "full"):
            d = G.OUT / cat / f"{short}-dev-{dev}"
            d.mkdir(parents=True, exist_ok=True)
            f = d / name
            f.symlink_to(f"/dev/{dev}")
            G.add(cat, f"{short}-dev-{dev}", consumer, _rel(f), "character device", input_rel=_rel(f))
    # A sparse dump far over its cap (made at run time: 256 MiB of holes).
    d = G.OUT / cat / "fr-sparse-giant"
    d.mkdir(parents=True, exist_ok=True)
    (d / ".keep").write_bytes(b"")
    f = d / "nccl_trace_rank_0.pkl"
    G.add(cat, "fr-sparse-giant", "import_torch_fr", _rel(f), "byte limit", input_rel=_rel(f))
    G.ENTRIES[-1]["special"] = [{"path": _rel(f), "kind": "sparse", "size": 256 << 20, "prefix_hex": "8004"}]
    # Incident members that are not regular files.
    for member, kind, frag in (("manifest.json", "fifo", "FIFO"), ("tables/steps.parquet", "fifo", "FIFO"),
                               ("tables/steps.parquet", "socket", "socket"), ("manifest.json", "socket", "socket")):
        label = f"incident-{member.split('/')[-1].split('.')[0]}-{kind}"
        inc = G.good_incident(G.OUT / cat / label / "inc")
        (inc / member).unlink()
        G.add(cat, label, "ingest", _rel(inc / member), frag)
        G.ENTRIES[-1]["special"] = [{"path": _rel(inc / member), "kind": kind}]
    # Artifacts the incident names outside itself (with the right digest): never read or stored.
    for role in ("source", "input", "patch"):
        label = f"artifact-outside-{role}"
        inc = G.good_incident(G.OUT / cat / label / "inc")
        secret = G.OUT / cat / label / "secret.txt"
        secret.write_bytes(b"user's private file\n")
        m = G.read_manifest(inc)
        # The runner writes the entry's work directory for {w}: an absolute path to an existing
        # file with its right digest, which the old ingest copied into the store.
        m["artifacts"] = [{"role": role, "path": "{w}/" + _rel(secret), "relpath": "s.txt" if role == "source" else None,
                           "digest": G.hash_file(secret), "size": secret.stat().st_size}]
        G.write_manifest(inc, m)
        G.add(cat, label, "ingest", _rel(inc / "manifest.json"), "outside the incident directory")
        G.ENTRIES[-1]["fill_w"] = [_rel(inc / "manifest.json")]
    for role in ("source", "input"):
        for dev in ("zero", "urandom"):
            label = f"artifact-dev-{dev}-{role}"
            inc = G.good_incident(G.OUT / cat / label / "inc")
            m = G.read_manifest(inc)
            m["artifacts"] = [{"role": role, "path": f"/dev/{dev}", "relpath": "s.txt" if role == "source" else None,
                               "digest": "0" * 64, "size": 0}]
            G.write_manifest(inc, m)
            G.add(cat, label, "ingest", _rel(inc / "manifest.json"), "outside the incident directory")
    for role, dev in (("binary", "zero"), ("library", "urandom")):
        label = f"artifact-dev-{dev}-{role}"
        inc = G.good_incident(G.OUT / cat / label / "inc")
        m = G.read_manifest(inc)
        m["artifacts"] = [{"role": role, "path": f"/dev/{dev}", "relpath": None, "digest": "0" * 64, "size": 0}]
        G.write_manifest(inc, m)
        G.add(cat, label, "ingest", f"/dev/{dev}", "character device")


# ---------------------------------------------------------------- sizes and amplification

def _rle_parquet(path: Path, rows: int, cols: dict) -> None:
    chunk = min(rows, 5_000_000)  # few row groups: a few KB on disk
    t = pa.table({k: pa.array([v] * chunk, pa.int64() if isinstance(v, int) else pa.string()) for k, v in cols.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, t.schema, compression="zstd", max_rows_per_page=chunk, write_batch_size=chunk,
                          write_statistics=False) as w:
        for _ in range(rows // chunk):
            w.write_table(t, row_group_size=chunk)


def sizes() -> None:
    cat = "h_sizes"
    steps = {"step_id": 0, "thread_id": 1, "start_ns": 5, "end_ns": 6}
    kern = {"name": "k", "device": 0, "stream": 7, "start_ns": 5, "end_ns": 6}
    for label, table, rows, cols, frag in [
        ("steps-30m-rows", "steps", 30_000_000, steps, "rows, over the limit"),
        ("steps-15m-rows", "steps", 15_000_000, steps, "rows, over the limit"),
        ("kernels-30m-rows", "kernels", 30_000_000, kern, "rows, over the limit"),
    ]:
        inc = G.good_incident(G.OUT / cat / label / "inc")
        f = inc / "tables" / f"{table}.parquet"
        f.unlink()
        _rle_parquet(f, rows, cols)
        m = G.read_manifest(inc)
        m["tables"][table] = {"path": f"tables/{table}.parquet", "rows": rows, "digest": G.hash_file(f)}
        G.write_manifest(inc, m)
        G.add(cat, label, "ingest", _rel(f), frag)
    s = "x" * (64 << 10)  # 64 KiB on disk, 320 MiB once each reference is expanded
    for label, obj, frag in [
        ("memo-string-x5000", _dump([s] * 5000), "bytes of text"),
        ("memo-bytes-x5000", _dump([s.encode()] * 5000), "bytes of text"),
        ("memo-key-strings", _dump([{s: 1}] * 5000), "bytes of text"),
    ]:
        _file_entry(cat, label, "nccl_trace_rank_0.pkl", pickle.dumps(obj, protocol=4), "import_torch_fr", frag)
    for label, depth in (("memo-list-doubling-40", 40), ("memo-list-doubling-26", 26)):
        a: list = [1]
        for _ in range(depth):
            a = [a, a]
        _file_entry(cat, label, "nccl_trace_rank_0.pkl", pickle.dumps(_dump(a), protocol=4), "import_torch_fr", "expands to more than")
    d: dict = {"x": 1}
    for i in range(40):
        d = {"a": d, "b": d}
    _file_entry(cat, "memo-dict-doubling-40", "nccl_trace_rank_0.pkl", pickle.dumps(_dump([d]), protocol=4),
                "import_torch_fr", "expands to more than")
    # YAML alias bombs for the configuration (stallcase check-config)
    def laughs(kind, levels):
        lines = ['a0: &a0 {x: 1, y: 2}' if kind == "dict" else 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        for i in range(1, levels):
            inner = ", ".join(f"k{j}: *a{i - 1}" for j in range(9)) if kind == "dict" else ",".join([f"*a{i - 1}"] * 9)
            lines.append(f"a{i}: &a{i} " + ("{" + inner + "}" if kind == "dict" else "[" + inner + "]"))
        lines.append(f"trials: *a{levels - 1}" if kind == "dict" else f"demo: {{args: *a{levels - 1}}}")
        return ("\n".join(lines) + "\n").encode()
    for kind in ("dict", "list"):
        for levels in (7, 9, 12):
            _file_entry(cat, f"yaml-laughs-{kind}-{levels}", "c.yaml", laughs(kind, levels), "check_config", "through YAML aliases")
    _file_entry(cat, "yaml-recursive-alias", "c.yaml", b"a: &a [*a]\n", "check_config", "")
    # Patterns that a linear-time engine cannot run (backreferences, lookaround) or that lack the group.
    good = _trace([_ev(), _kern()])
    for label, pat, frag in [
        ("backreference", r"ProfilerStep#(\d)\1", "RE2"), ("lookahead", r"ProfilerStep#(?=\d)(\d+)", "RE2"),
        ("lookbehind", r"(?<=#)(\d+)", "RE2"), ("two-groups", r"(Profiler)Step#(\d+)", "exactly one group"),
        ("no-group", r"ProfilerStep#\d+", "exactly one group"), ("invalid", r"ProfilerStep#(\d+", "RE2"),
    ]:
        _file_entry(cat, f"step-pattern-{label}", "t.json", good, "import_kineto", frag, names="--step-pattern",
                    args=[f"--step-pattern={pat}"])


# ---------------------------------------------------------------- store and outputs

def store() -> None:
    cat = "h_store"
    # verify: a prefix directory that is a symlink to a directory holding a corrupted object
    root, rec = G._good_results(G.OUT / cat / "verify-symlinked-prefix" / "results")
    victim = G._obj(root, rec["tables"]["steps"]["digest"])
    prefix = victim.parent
    elsewhere = root.parent / "elsewhere"
    shutil.copytree(prefix, elsewhere)
    (elsewhere / victim.name).write_bytes(b"corrupted")
    shutil.rmtree(prefix)
    prefix.symlink_to("../../../elsewhere")
    G.add(cat, "verify-symlinked-prefix", "verify", _rel(prefix), "prefix directory is a symlink", input_rel=_rel(root))
    root, rec = G._good_results(G.OUT / cat / "verify-symlinked-store" / "results")
    shutil.move(str(root / "cas" / "blake3"), str(root.parent / "real-blake3"))
    (root / "cas" / "blake3").symlink_to("../../real-blake3")
    G.add(cat, "verify-symlinked-store", "verify", _rel(root / "cas" / "blake3"), "store directory is a symlink", input_rel=_rel(root))
    # ingest into a store whose prefix path is a file, or whose snapshot path is a directory
    inc = G.good_incident(G.OUT / cat / "ingest-prefix-is-a-file" / "inc")
    res = G.OUT / cat / "ingest-prefix-is-a-file" / "results"
    digest = G.hash_file(inc / "manifest.json")
    (res / "cas" / "blake3").mkdir(parents=True)
    (res / "cas" / "blake3" / digest[:2]).write_bytes(b"in the way")
    G.add(cat, "ingest-prefix-is-a-file", "argv", _rel(res / "cas" / "blake3" / digest[:2]), "not a directory", input_rel=_rel(inc))
    G.ENTRIES[-1]["argv"] = ["ingest", "{w}/" + _rel(inc), "--results-dir", "{w}/" + _rel(res)]
    inc = G.good_incident(G.OUT / cat / "ingest-snapshot-is-a-dir" / "inc")
    res = G.OUT / cat / "ingest-snapshot-is-a-dir" / "results"
    (res / "inc" / "snapshot.json").mkdir(parents=True)
    (res / "inc" / "snapshot.json" / ".keep").write_bytes(b"")
    G.add(cat, "ingest-snapshot-is-a-dir", "argv", _rel(res / "inc" / "snapshot.json"), "directory", input_rel=_rel(inc))
    G.ENTRIES[-1]["argv"] = ["ingest", "{w}/" + _rel(inc), "--results-dir", "{w}/" + _rel(res)]
    # -o naming a FIFO or a symlink: diagnose and export refuse to replace it
    for cmd in ("diagnose", "export"):
        for kind in ("fifo", "symlink", "socket"):
            label = f"{cmd}-out-{kind}"
            inc = G.good_incident(G.OUT / cat / label / "inc")
            out = G.OUT / cat / label / "out.json"
            target = G.OUT / cat / label / "precious.json"
            target.write_bytes(b'{"keep": true}\n')
            spec = {"path": _rel(out), "kind": kind, "target": "precious.json"}
            G.add(cat, label, "argv", _rel(out), "refusing to replace it", input_rel=_rel(inc))
            G.ENTRIES[-1]["argv"] = [cmd, "{w}/" + _rel(inc), "-o", "{w}/" + _rel(out)]
            G.ENTRIES[-1]["special"] = [spec]


def generate(g) -> None:
    global G
    G = g
    for fam in (numbers, text, shape, special, sizes, store):
        fam()
