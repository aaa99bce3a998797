"""Corpus family of issue 36: hostile Nsight Systems SQLite exports for `stallcase import nsys`.

generate.py calls `generate(g)` after round3.py; run alone (`python tests/corpus/nsys_hostile.py`)
it rewrites only its own category and its entries in expected.json (the other families' Parquet
bytes depend on the pyarrow version, so a full regeneration rewrites them too).
Each export is a valid small one (benchmarks/nsys_export.py) with one thing
broken (the 2022.2 layout: fewer tables, so fewer bytes); every one must end in one line naming the file and the table/column.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CAT = "nsys_hostile"
G = None  # the generate module


def _base(f: Path) -> Path:
    from benchmarks.nsys_export import GPID, create

    db = create(f, "2022.2", page_size=512)  # the layout without ENUM tables, small pages: ~8 KB an entry
    tid = GPID + 7
    for t in ("TARGET_INFO_GPU", "PROCESSES", "ThreadNames", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
        db.execute(f"DROP TABLE {t}")  # optional tables (the importer reads what is there): fewer bytes
    db.execute("INSERT INTO StringIds VALUES (1, 'kernel_a'), (2, 'cudaLaunchKernel_v7000'), (3, 'ProfilerStep#0'), (4, 'ProfilerStep#1')")
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1764460800000000000, '', '')")
    for i in range(4):
        t = 1_000_000 + i * 1_000_000
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, blockZ) VALUES (?,?,0,1,7,?,?,1,1,1,1,1,1,1,1)",
                   (t + 100_000, t + 500_000, i + 1, GPID))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) "
                   "VALUES (?,?,0,?,?,2,0)", (t, t + 50_000, tid, i + 1))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
                   "bytes, copyKind, srcKind, dstKind) VALUES (?,?,0,1,7,NULL,?,64,1,0,2)", (t + 600_000, t + 700_000, GPID))
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId) VALUES (900000, 2900000, 59, ?, 3), "
               "(2900000, 4900000, 59, ?, 4)", (tid, tid))
    db.commit()
    db.execute("VACUUM")
    db.close()
    return f


def _sql(label: str, sql: str, frag: str, *, name: str = "export.sqlite") -> None:
    d = G.OUT / CAT / label
    d.mkdir(parents=True, exist_ok=True)
    f = _base(d / name)
    with sqlite3.connect(f) as db:
        db.executescript(sql)
    db.close()
    G.add(CAT, label, "import_nsys", G.rel(f), frag, input_rel=G.rel(f))


def _bytes(label: str, data: bytes, frag: str, name: str = "export.sqlite") -> None:
    d = G.OUT / CAT / label
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)
    G.add(CAT, label, "import_nsys", G.rel(d / name), frag, input_rel=G.rel(d / name))


def generate(g) -> None:
    global G
    G = g
    K, R, M, N = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"
    # files that are not exports
    _bytes("empty", b"", f"no {K} table")
    _bytes("not-sqlite", b"nsys report? no\n" * 64, "not an SQLite database")
    _bytes("report-without-nsys", b"\0" * 256, "nsys export --type sqlite", name="run.nsys-rep")
    d = G.OUT / CAT / "truncated"
    d.mkdir(parents=True, exist_ok=True)
    whole = _base(d / "whole.tmp").read_bytes()
    (d / "whole.tmp").unlink()
    _bytes("truncated", whole[:len(whole) // 2], "malformed")
    # tables that are not what they claim
    _sql("no-kernel-table", f"DROP TABLE {K};", f"no {K} table")
    _sql("kernel-table-is-a-view", f"DROP TABLE {K}; CREATE VIEW {K} AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
         "SELECT x + 1 FROM c) SELECT x AS start, x + 1 AS end, 0 AS globalPid FROM c;", f"no {K} table")
    # values that are not what the column holds
    _sql("text-start", f"UPDATE {K} SET start = 'soon' WHERE rowid = 2;", f"{K}.start: 1 value(s) that are not an integer, e.g. 'soon'")
    _sql("real-end", f"UPDATE {K} SET end = end + 0.5 WHERE rowid = 2;", f"{K}.end: 1 value(s) that are not an integer, e.g. 2500000.5")
    _sql("reversed-copy", f"UPDATE {M} SET end = start - 1 WHERE rowid = 3;", f"{M}.end: 1 row(s) end before they start")
    _sql("negative-start", f"UPDATE {R} SET start = -5 WHERE rowid = 1;", f"{R}.start: a time outside")
    _sql("huge-start", f"UPDATE {K} SET start = 9223372036854775000, end = 9223372036854775800 WHERE rowid = 4;", f"{K}.start: a time outside")
    _sql("device-over-int32", f"UPDATE {K} SET deviceId = 1099511627776 WHERE rowid = 1;", f"(from {K}.deviceId)")
    _sql("name-not-in-stringids", "DELETE FROM StringIds WHERE id = 1;", f"{K}.demangledName")
    _sql("name-is-a-blob", "UPDATE StringIds SET value = X'00FF' WHERE id = 2;", "StringIds.value of id 2")
    _sql("nvtx-not-utf8", f"UPDATE {N} SET textId = NULL, text = CAST(X'50726f66696c657253746570ff' AS TEXT) WHERE rowid = 1;", N)
    _sql("negative-pid", f"UPDATE {K} SET globalPid = -1 WHERE rowid = 1;", f"{K}.globalPid: -1 is not a process id")
    _sql("rank-not-a-number", "CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, "
         "value TEXT); INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, '', 'DeviceEnvironment', 610, 'RANK=abc');",
         "DeviceEnvironment: RANK='abc' is not a rank")
    _sql("session-start-text", "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES ('yesterday', '', ''); "
         "DELETE FROM TARGET_INFO_SESSION_START_TIME WHERE utcEpochNs = 1764460800000000000;",
         "TARGET_INFO_SESSION_START_TIME.utcEpochNs")
    _sql("step-id-huge", "UPDATE StringIds SET value = 'ProfilerStep#99999999999999999999' WHERE id = 3;", "step id")


def main() -> int:
    """Rewrite this family only: its directory and its entries in expected.json."""
    import shutil
    import types

    sys.path.insert(0, str(HERE.parent.parent))
    out = HERE
    shutil.rmtree(out / CAT, ignore_errors=True)
    entries: list[dict] = []

    def add(category, entry, consumer, names, fragment, *, input_rel=None, args=None):
        rec = {"id": f"{category}/{entry}", "consumer": consumer, "input": input_rel, "names": names, "fragment": fragment}
        entries.append(rec)

    g = types.SimpleNamespace(OUT=out, add=add, rel=lambda p: str(Path(p).relative_to(out)))
    generate(g)
    exp = json.loads((out / "expected.json").read_text())
    kept = [e for e in exp["entries"] if not e["id"].startswith(CAT + "/")]
    # where generate.py puts them: after the other families, before the `#diagnose` copies it adds last
    at = next((i for i, e in enumerate(kept) if e["id"].endswith("#diagnose")), len(kept))
    (out / "expected.json").write_text(json.dumps({"entries": kept[:at] + entries + kept[at:]}, indent=1, ensure_ascii=True) + "\n")
    print(f"{len(entries)} {CAT} entries in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
