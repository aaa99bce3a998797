"""An Nsight Systems SQLite export, read by what it holds (not by its nsys version).

`nsys export --type sqlite` writes one table per event kind; which tables and columns exist
differs by version (tests/test_nsys_import.py has a test per difference):
  * the export's metadata table is EXPORT_META_DATA (2022.2) or META_DATA_EXPORT (2024.5);
  * ENUM_* tables (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND, ENUM_CUPTI_SYNC_TYPE,
    ENUM_NSYS_EVENT_CLASS) exist in 2024.5, not in 2022.2: without them the documented numeric
    codes below are used;
  * an NVTX range's name is in NVTX_EVENTS.text or, through StringIds, in textId;
  * CUPTI_ACTIVITY_KIND_RUNTIME has a `name` text column in 2022.2 only; nameId everywhere;
  * the kernel, memcpy and memset tables gained greenContextId (not read).
So every query is built from `sqlite_master` and `PRAGMA table_info`; an absent column reads
as NULL and an absent table as no rows. Only ordinary tables are read (a view or virtual table
named like an nsys table could run arbitrary queries); the file is opened read-only and
immutable, with the schema untrusted (no functions from it run).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

from ..core import bounds
from ..core.errors import InputError

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
SCHED = "SCHED_EVENTS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2024.5, 2022.2

# Documented numeric codes, used where the export has no ENUM_* table (2022.2), by their enum
# names without the prefix. ENUM_CUDA_MEMCPY_OPER: CUPTI's CUpti_ActivityMemcpyKind values
# (vocabulary.CUPTI_MEMCPY_KINDS), plus 11-13 for unified-memory migrations.
MEMCPY_ENUM = ("ENUM_CUDA_MEMCPY_OPER", "CUDA_MEMCPY_KIND_",
               {0: "UNKNOWN", 1: "HTOD", 2: "DTOH", 3: "HTOA", 4: "ATOH", 5: "ATOA", 6: "ATOD", 7: "DTOA", 8: "DTOD",
                9: "HTOH", 10: "PTOP", 11: "UVM_HTOD", 12: "UVM_DTOH", 13: "UVM_DTOD"})
# ENUM_CUDA_MEM_KIND: nsys numbers memory kinds from 0, one below CUPTI's CUpti_ActivityMemoryKind.
MEM_ENUM = ("ENUM_CUDA_MEM_KIND", "CUDA_MEMOPR_MEMORY_KIND_",
            {0: "PAGEABLE", 1: "PINNED", 2: "DEVICE", 3: "ARRAY", 4: "MANAGED", 5: "DEVICE_STATIC", 6: "MANAGED_STATIC", 7: "UNKNOWN"})
# ... and the memcpy table's words for them (static device/managed memory is still device/managed).
MEM_WORDS = {"PAGEABLE": "pageable", "PINNED": "pinned", "DEVICE": "device", "ARRAY": "array", "MANAGED": "managed",
             "DEVICE_STATIC": "device", "MANAGED_STATIC": "managed"}
# ENUM_CUPTI_SYNC_TYPE (= CUpti_ActivitySynchronizationType; the recorder names rows by it too).
SYNC_ENUM = ("ENUM_CUPTI_SYNC_TYPE", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_",
             {0: "UNKNOWN", 1: "EVENT_SYNCHRONIZE", 2: "STREAM_WAIT_EVENT", 3: "STREAM_SYNCHRONIZE", 4: "CONTEXT_SYNCHRONIZE"})
# ENUM_NSYS_EVENT_CLASS of CUPTI_ACTIVITY_KIND_RUNTIME rows: 0 CUDA runtime, 1 CUDA driver. Other
# classes (67 CUDA backtrace, in 2022.2) repeat a call already listed: not read.
API_CLASSES = (0, 1)
# NVTX_EVENTS.eventType of ranges (ENUM_NSYS_EVENT_TYPE): 59 push/pop, 60 start/end. Marks,
# categories and domain records have no duration.
NVTX_RANGE_TYPES = (59, 60)
# SCHED_EVENTS.threadState at a switch out (ENUM_SAMPLING_THREAD_STATE) -> the sched table's
# /proc-style state; 0 (unknown, what most exports hold) is "off_cpu": the thread left the CPU,
# nsys did not say why.
THREAD_STATES = {1: "R", 2: "S", 3: "D", 4: "T", 5: "X", 7: "S"}

# Names read from StringIds for one import, in bytes: kernel names are long templates, but a
# file that asks for more than this is not a profile.
MAX_NAME_BYTES = 256 << 20
# Rows of a small table (ENUM_*, ThreadNames, TARGET_INFO_*, the metadata) read whole.
MAX_SMALL_ROWS = 100_000


class Export:
    """One opened export: its tables and columns, and lookups of its string and enum tables."""

    def __init__(self, path: Path):
        self.path = path
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise InputError(path, f"cannot read the export ({exc.strerror})") from None
        if size > bounds.MAX_TRACE_BYTES:
            raise InputError(path, f"export is {size} bytes, over the limit of {bounds.MAX_TRACE_BYTES}")
        try:
            self.db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
            self.db.execute("PRAGMA trusted_schema = OFF")
            self.db.execute("PRAGMA query_only = ON")
            rows = self.db.execute("SELECT name, type, sql FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            raise InputError(path, f"not an SQLite database ({exc}): export the report with `nsys export --type sqlite`") from None
        # Ordinary tables only: a view or virtual table could compute rows without end.
        self.tables = {n for n, t, sql in rows if t == "table" and isinstance(sql, str) and not sql.lstrip().upper().startswith("CREATE VIRTUAL")}
        self._cols: dict[str, list[str]] = {}
        self._names_bytes = 0
        if KERNEL not in self.tables:
            raise InputError(path, f"no {KERNEL} table: not an nsys export with CUDA kernels (profile with `nsys profile --trace=cuda`)")

    def close(self) -> None:
        self.db.close()

    # -- schema ------------------------------------------------------------------------------
    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        if table not in self._cols:
            self._cols[table] = [r[1] for r in self.db.execute(f'PRAGMA table_info("{table}")')] if table in self.tables else []
        return self._cols[table]

    def col(self, table: str, name: str, fallback: str = "NULL") -> str:
        """A column of `table` as an SQL expression, or `fallback` where this export lacks it."""
        return f'"{name}"' if name in self.columns(table) else fallback

    def query(self, table: str, sql: str, params=()) -> sqlite3.Cursor:
        """Run one statement over `table`; an SQLite error names the file and the table."""
        try:
            return self.db.execute(sql, params)
        except sqlite3.Error as exc:
            raise InputError(self.path, f"{table}: {exc}") from None

    def fetch(self, table: str, cur: sqlite3.Cursor, n: int) -> list:
        try:
            return cur.fetchmany(n)
        except sqlite3.Error as exc:  # e.g. text that is not UTF-8, a corrupt page
            raise InputError(self.path, f"{table}: {exc}") from None

    # -- lookups -----------------------------------------------------------------------------
    def strings(self, ids: list[int], table: str, column: str) -> dict[int, str]:
        """StringIds values of `ids` (the distinct ids one column refers to)."""
        if not ids:
            return {}
        if "StringIds" not in self.tables:
            raise InputError(self.path, f"{table}.{column} refers to StringIds, which the export lacks")
        out: dict[int, str] = {}
        for i in range(0, len(ids), 500):  # under SQLite's bound-parameter limit
            part = ids[i:i + 500]
            cur = self.query("StringIds", f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(part))})", part)
            for k, v in self.fetch("StringIds", cur, len(part) + 1):
                if not isinstance(v, str):
                    raise InputError(self.path, f"StringIds.value of id {k} (named by {table}.{column}) is not text")
                self._names_bytes += len(v)
                out[k] = v
        if self._names_bytes > MAX_NAME_BYTES:
            raise InputError(self.path, f"{table}.{column}: names over {MAX_NAME_BYTES} bytes in StringIds")
        return out

    def enum(self, spec: tuple[str, str, dict[int, str]]) -> dict[int, str]:
        """An ENUM_* table as {id: name without its prefix}, or the documented codes without it."""
        table, prefix, fallback = spec
        if table not in self.tables:
            return dict(fallback)
        rows = self.text_rows(table, f'SELECT id, name FROM "{table}"')
        return {int(i): str(n).removeprefix(prefix) for i, n in rows if isinstance(i, int) and n is not None}

    def text_rows(self, table: str, sql: str) -> list[tuple]:
        """A small provenance table's rows, text decoded leniently (nsys stores binary blobs
        in some of them, e.g. TARGET_INFO_SYSTEM_ENV)."""
        if table not in self.tables:
            return []
        rows = self.fetch(table, self.query(table, sql), MAX_SMALL_ROWS + 1)
        if len(rows) > MAX_SMALL_ROWS:
            raise InputError(self.path, f"{table}: more than {MAX_SMALL_ROWS} rows (the limit for this table)")
        return [tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in r) for r in rows]

    def metadata(self) -> dict[str, str]:
        for t in META_TABLES:
            if t in self.tables:
                rows = self.text_rows(t, f'SELECT CAST(name AS BLOB), CAST(value AS BLOB) FROM "{t}"')
                return {"table": t, **{str(k): str(v) for k, v in rows if k}}
        return {}


def export_report(path: Path, workdir: Path) -> Path:
    """A `.nsys-rep` (or older `.qdrep`) report -> its SQLite export in `workdir`, by the `nsys`
    on the PATH (an argv list, no shell); without nsys, one line saying how to export it."""
    nsys = shutil.which("nsys")
    how = f"export it with `nsys export --type sqlite --output REPORT.sqlite {path.name}` and import the .sqlite"
    if nsys is None:
        raise InputError(path, f"an Nsight Systems report and `nsys` is not on the PATH: {how}")
    out = Path(tempfile.mkdtemp(dir=workdir)) / (path.stem + ".sqlite")
    try:
        done = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(path)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(path, f"`nsys export` failed ({exc}): {how}") from None
    if done.returncode != 0 or not out.is_file():
        last = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise InputError(path, f"`nsys export` exited {done.returncode} ({last[0][:200]}): {how}")
    return out
