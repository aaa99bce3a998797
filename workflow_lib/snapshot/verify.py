"""Verification pass over a results tree: is anything that claims to be complete corrupt?

    verify(root, incidents_dir=None, clean_temp=False, progress=None) -> Report

Checks, under `root` (a results directory, the store at root/cas/blake3/):
  - every store object: its content hashes to the digest it is named by;
  - every record (*.json under root/<incident>/ whose `kind` names a schema) against
    its schema; every store object a record references is there and sound (a snapshot's
    manifest, tables and stored artifacts; a plan's sources and patches); a diagnosis'
    per-step tables beside it hash to the digests it names; a comparison's blocks each
    have the execution record it was made from;
  - with `incidents_dir`: every incident manifest, its table digests and table contracts.
Temp files (`.tmp-*`) are what a writer killed mid-write leaves behind; atomic writes
never rename them into place, so they are leftovers, not corruption, and `clean_temp`
removes them (only do so when no writer is running: a live writer's temp file is one).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..core import layout, records
from ..core.atomic import TMP_PREFIX
from ..core.cas import ALGO, CAS, hash_file
from ..core.errors import StallcaseError
from ..core.incident import MANIFEST, read_incident

# Logs and trial work dirs (materialized sources, the workload's own outputs) are not
# records: layout.holds_records says which paths are, for every run's directory too.

Progress = Callable[[str, int, int], None]


@dataclass
class Report:
    """What a verification pass found. `corrupt` and `leftovers` hold (path, problem)."""

    objects: int = 0
    records: int = 0
    manifests: int = 0
    other: int = 0
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    leftovers: list[tuple[str, str]] = field(default_factory=list)
    unreferenced: list[tuple[str, str]] = field(default_factory=list)
    repaired: list[tuple[str, str]] = field(default_factory=list)
    unrepairable: list[tuple[str, str]] = field(default_factory=list)
    removed: int = 0
    stale: dict = field(default_factory=dict)
    """record path -> digests it references that are missing or corrupt (what --repair can mend)"""

    @property
    def ok(self) -> bool:
        return not self.corrupt


def _walk_files(top: Path):
    """Every regular file and symlink under `top`, sorted (no symlinked directories followed)."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _leftover(report: Report, path: Path, clean: bool) -> None:
    report.leftovers.append((str(path), "temp file left by an interrupted write"))
    if clean:
        try:
            path.unlink()
            report.removed += 1
        except FileNotFoundError:
            pass


def check_store(root: Path, report: Report, clean: bool, progress: Progress | None) -> set[str]:
    """Hash every object; returns the digests that are present and sound."""
    objects = CAS(root).objects
    sound: set[str] = set()
    for d in (root / "cas", objects):
        if d.is_symlink():
            # Objects behind a link are not the store's own; following it could hash anything.
            report.corrupt.append((str(d), "store directory is a symlink: refused, not followed (objects must live in the store)"))
            return sound
    if not objects.is_dir():
        return sound
    for sub in sorted(objects.iterdir()):
        if sub.is_symlink():
            # os.walk would skip it silently, and its objects would never be checked.
            report.corrupt.append((str(sub), "store prefix directory is a symlink: refused, not followed "
                                             "(its objects are not checked; replace it with a directory)"))
    files = list(_walk_files(objects))
    total = len(files)
    for i, path in enumerate(files, 1):
        if progress:
            progress("objects", i, total)
        if path.name.startswith(TMP_PREFIX):
            _leftover(report, path, clean)
            continue
        report.objects += 1
        rel = path.relative_to(objects).parts
        digest = "".join(rel)
        if len(rel) != 2 or len(rel[0]) != 2 or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            report.corrupt.append((str(path), f"not a {ALGO} store object name (expected {ALGO}/xx/<62 hex>)"))
            continue
        if path.is_symlink() or not path.is_file():
            report.corrupt.append((str(path), "store object is not a regular file"))
            continue
        try:
            actual = hash_file(path)
        except OSError as exc:
            report.corrupt.append((str(path), f"unreadable: {exc.strerror or exc}"))
            continue
        if actual != digest:
            report.corrupt.append((str(path), f"content hashes to {actual}, not to its name {digest}"))
        else:
            sound.add(digest)
    return sound


def _schema_kinds() -> set[str]:
    return {p.name[: -len(".schema.json")] for p in records.SCHEMA_DIR.glob("*.schema.json")} - {"config", "incident_manifest"}


def _check_record(path: Path, kinds: set[str], sound: set[str], report: Report) -> None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.corrupt.append((str(path), f"unreadable: {exc.strerror or exc}"))
        return
    try:
        obj = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        report.corrupt.append((str(path), "not UTF-8 text"))
        return
    except (ValueError, RecursionError) as exc:
        # Records are written atomically, so a half-written one never appears; an
        # unparseable .json here was damaged afterwards or written by something else.
        report.corrupt.append((str(path), f"not valid JSON ({str(exc).splitlines()[0][:200]})"))
        return
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if not isinstance(kind, str) or kind not in kinds:
        report.other += 1  # JSON that is not a stage record (kind names no schema)
        return
    report.records += 1
    try:
        rec = records.parse_record(data, kind, path)
    except StallcaseError as exc:
        report.corrupt.append((str(path), exc.problem))
        return
    if kind == "diagnosis" and "step_tables" in rec:  # version 3: its steps are in the tables beside it
        for name, table in layout.diagnosis_tables(path).items():
            want = rec["step_tables"][name]["digest"]
            try:
                got = hash_file(table)
            except (OSError, StallcaseError):
                report.corrupt.append((str(path), f"its {name} table {table} is missing or unreadable"))
                continue
            if got != want:
                report.corrupt.append((str(path), f"its {name} table {table} hashes to {got}, the record says {want}"))
    for what, digest in store_references(kind, rec):
        if digest not in sound:
            report.corrupt.append((str(path), f"{what} object {digest} is missing from the store or corrupt"))
            report.stale.setdefault(str(path), set()).add(digest)
    if kind == "comparison":
        check_comparison(path, rec, report)


def store_references(kind: str, rec: dict) -> list[tuple[str, str]]:
    """(what, digest) of every store object a record needs: a snapshot's manifest, tables and the
    artifacts the snapshot stage stores (build.DEFAULT_STORE_ROLES; binaries and libraries are
    verified in place), a plan's arm sources and patches."""
    from .build import DEFAULT_STORE_ROLES

    if kind == "snapshot":
        return ([("manifest", rec["manifest_digest"])] + [(f"table {n}", e["digest"]) for n, e in sorted(rec["tables"].items())]
                + [(f"{a['role']} {a['path']}", a["digest"]) for a in rec.get("artifacts", []) if a["role"] in DEFAULT_STORE_ROLES])
    if kind == "plan":
        out = []
        for name, arm in sorted(rec.get("arms", {}).items()):
            out += [(f"{name} source {s['relpath']}", s["digest"]) for s in arm.get("sources", [])]
            patch = (arm.get("changes") or {}).get("patch_digest")
            if patch:
                out.append((f"{name} patch", patch))
        return out
    return []


def check_comparison(path: Path, rec: dict, report: Report) -> None:
    """Each block a comparison was made from still has its execution record, the same one
    (a failed `--forcerun trials` removes them while the comparison stays up to date)."""
    for block, digest in sorted(rec.get("execution_digests", {}).items()):
        execution = path.parent / "execution" / f"{block}.json"
        try:
            got = records.digest_of(json.loads(execution.read_bytes()))
        except (OSError, ValueError):
            report.corrupt.append((str(path), f"block {block}'s execution record {execution} is missing or unreadable: "
                                              "the comparison has nothing behind it"))
            report.stale.setdefault(str(path), set())
            continue
        if got != digest:
            report.corrupt.append((str(path), f"block {block}'s execution record {execution} is not the one it was made "
                                              f"from (digest {got}, the comparison says {digest})"))
            report.stale.setdefault(str(path), set())


def check_records(root: Path, sound: set[str], report: Report, clean: bool, progress: Progress | None) -> None:
    if not root.is_dir():
        return
    files = []
    for inc in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "cas"):
        for path in _walk_files(inc):
            rel = path.relative_to(inc).parts
            if not layout.holds_records(rel):  # logs and work dirs, also each run's (layout.py)
                continue
            if path.name.startswith(TMP_PREFIX):
                _leftover(report, path, clean)
            elif path.suffix == ".json":
                files.append(path)
    kinds = _schema_kinds()
    for i, path in enumerate(files, 1):
        if progress:
            progress("records", i, len(files))
        _check_record(path, kinds, sound, report)


def check_incidents(incidents_dir: Path, report: Report, clean: bool, progress: Progress | None) -> None:
    if not incidents_dir.is_dir():
        report.corrupt.append((str(incidents_dir), "incidents directory not found"))
        return
    dirs = sorted(p for p in incidents_dir.iterdir() if p.is_dir())
    for i, inc in enumerate(dirs, 1):
        if progress:
            progress("incidents", i, len(dirs))
        for path in _walk_files(inc):
            if path.name.startswith(TMP_PREFIX):
                _leftover(report, path, clean)
        if not (inc / MANIFEST).exists():
            # Tables are written before the manifest: no manifest = an incident whose
            # writer never finished, which nothing ingests. Not corrupt, but worth saying.
            report.leftovers.append((str(inc), "incident directory without manifest.json (incomplete write)"))
            continue
        report.manifests += 1
        try:
            read_incident(inc, verify=True)
        except StallcaseError as exc:
            report.corrupt.append((exc.where or str(inc), exc.problem))


_HEX64 = re.compile(r"\A[0-9a-f]{64}\Z")


def referenced_digests(root: Path) -> set[str]:
    """Every digest a record under `root` could point at: each 64-hex string in any JSON file,
    plus the digest of each record itself (the plan is stored under its own digest) and of
    its bytes. Conservative: anything that looks referenced is kept."""
    found: set[str] = set()
    if not root.is_dir():
        return found
    for inc in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "cas"):
        for path in _walk_files(inc):
            if path.suffix != ".json" or path.is_symlink() or not path.is_file():
                continue
            try:
                data = path.read_bytes()
                obj = json.loads(data.decode("utf-8"))
            except (OSError, ValueError):
                continue
            found.add(hash_file(path))
            try:
                found.add(records.digest_of(obj))
            except (TypeError, ValueError):
                pass
            stack = [obj]
            while stack:
                v = stack.pop()
                if isinstance(v, str) and _HEX64.match(v):
                    found.add(v)
                elif isinstance(v, dict):
                    stack.extend(v.values())
                elif isinstance(v, list):
                    stack.extend(v)
    return found


def repair_references(root: Path, report: Report) -> None:
    """Mend what a rerun can rebuild: a corrupt object is removed (it can never be used) and the
    record that needs a missing one is removed (cas.mark_stale), so a plain rerun of the workflow
    runs its stage again (the snapshot stores the incident again; a comparison is made again from
    executions run again). What is left is reported as not repairable."""
    from ..core.cas import mark_stale

    cas = CAS(root)
    for path, problem in list(report.corrupt):
        p = Path(path)
        if p.parent.parent == cas.objects and p.is_file() and not p.is_symlink():
            p.unlink()
            report.removed += 1
            report.repaired.append((path, "corrupt store object removed"))
        elif path in report.stale and p.is_file():
            mark_stale(p)
            report.repaired.append((path, "out of date, removed: a plain rerun of the workflow makes it again"))
        else:
            report.unrepairable.append((path, problem))


def repair_unreferenced(root: Path, sound: set[str], report: Report) -> None:
    """Remove sound store objects that no record references: what a refused or killed stage
    stored before it failed. Only when no stallcase writer is running (like clean_temp)."""
    keep = referenced_digests(root)
    cas = CAS(root)
    for digest in sorted(sound - keep):
        path = cas.path_for(digest)
        report.unreferenced.append((str(path), "store object no record references (removed)"))
        path.unlink(missing_ok=True)
        report.removed += 1


def verify(root: str | os.PathLike, *, incidents_dir: str | os.PathLike | None = None,
           clean_temp: bool = False, repair: bool = False, progress: Progress | None = None) -> Report:
    """Check a results tree (and optionally an incidents directory); never modifies
    anything except removing temp leftovers when `clean_temp`, and with `repair`: corrupt
    store objects and those no record references, and removing the records a rerun
    rebuilds (repair_references)."""
    root = Path(root)
    if not root.is_dir():
        raise StallcaseError(root, "results directory not found")
    report = Report()
    sound = check_store(root, report, clean_temp or repair, progress)
    check_records(root, sound, report, clean_temp or repair, progress)
    if repair:
        repair_references(root, report)
        if not report.unrepairable:  # an unreadable record could hide references: keep every object then
            repair_unreferenced(root, sound, report)
    if incidents_dir is not None:
        check_incidents(Path(incidents_dir), report, clean_temp, progress)
    return report


class Throttled:
    """A progress callback that reports at most every `every_s` seconds, plus the last item."""

    def __init__(self, emit: Callable[[str], None], every_s: float = 1.0):
        self.emit, self.every_s, self.last = emit, every_s, 0.0

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= self.every_s:
            self.last = now
            self.emit(f"verify: {what} {done}/{total}")
