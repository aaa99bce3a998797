"""The incident directory: what the recorder and the importers write, and the snapshot stage reads.

    <incidents_dir>/<incident_id>/
        manifest.json              schemas/incident_manifest.schema.json
        tables/<name>.parquet      one per table in workflow_lib.core.tables.TABLES that was written

Tables are written first, the manifest last (atomically), so a directory without a
manifest is an incomplete incident and is never ingested. The manifest records each
table's blake3 digest; reading verifies it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from . import bounds, records, safe_io, tables
from .cas import hash_file
from .errors import InputError, StallcaseError
from .types import MANIFEST_VERSION, IncidentManifest

MANIFEST = "manifest.json"
SOURCE_STATUSES = ("observed", "not_observed")


def check_incident_id(incident_id: str, where: str = "incident") -> str:
    """Incident ids become directory names: refuse anything that could escape or confuse
    (bounds.identifier: \\A...\\Z, so a trailing newline is refused too)."""
    try:
        return bounds.identifier(incident_id, "incident id", where)
    except InputError as exc:
        raise StallcaseError(where, exc.problem) from None


def incident_dir(incidents_dir: str | os.PathLike, incident_id: str) -> Path:
    return Path(incidents_dir) / check_incident_id(incident_id)


def source(status: str, reason: str | None = None, **detail) -> dict:
    """A manifest `sources` entry. not_observed requires a reason."""
    if status not in SOURCE_STATUSES:
        raise ValueError(f"source status must be one of {SOURCE_STATUSES}")
    if status == "not_observed" and not reason:
        raise ValueError("a not_observed source needs a reason")
    return {"status": status, "reason": reason, "detail": detail}


@dataclass
class Incident:
    """A read, verified incident: its manifest and tables."""

    path: Path
    """Where the incident was read from, the path its errors name and that tells it from another
    incident in one analysis (collectives keys ranks by it): the incident directory (read_incident),
    or, read back from the store, its snapshot record (snapshot/build.py's load_tables)."""
    manifest: dict
    tables: dict[str, pa.Table]

    def table(self, name: str) -> pa.Table:
        """The table, or an empty one with the contract schema when it was not written."""
        return self.tables.get(name, tables.empty(name))

    @property
    def typed_manifest(self) -> IncidentManifest:
        """The manifest as its typed record (its sources frozen SourceStatus), upgraded from an
        older version in records.upgrade: what readers such as the report read, by attribute.
        Made on each call: importers still amend `manifest` (torch_fr adds its sources)."""
        return IncidentManifest.from_json(records.upgrade("incident_manifest", self.manifest, where=self.path), str(self.path))

    def observed(self, source_name: str) -> bool:
        return self.manifest["sources"].get(source_name, {}).get("status") == "observed"


def write_incident(
    path: str | os.PathLike,
    manifest: dict,
    table_data: dict[str, pa.Table],
) -> Path:
    """Write tables then the manifest (atomically each). `manifest` lacks `tables`; it is filled here.

    Returns the manifest path. On any failure no manifest is written, so the
    directory is never taken for a complete incident.
    """
    path = Path(path)
    # Check every table before writing any: a refused import or capture leaves no
    # directory of tables that a reader would only refuse later.
    for name, table in table_data.items():
        if name not in tables.TABLES:
            raise StallcaseError(path, f"unknown table '{name}'")
        tables.check_table(name, table, path / f"tables/{name}.parquet")
    (path / "tables").mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, table in table_data.items():
        rel = f"tables/{name}.parquet"
        tables.write_table(path / rel, name, table)
        entries[name] = {"path": rel, "rows": table.num_rows, "digest": hash_file(path / rel)}
    return write_manifest(path, manifest, entries)


def write_manifest(path: Path, manifest: dict, entries: dict[str, dict]) -> Path:
    """The manifest last, once every table named in `entries` (path, rows, digest) is on disk."""
    full = dict(manifest)
    full["tables"] = entries
    full.setdefault("schema_version", MANIFEST_VERSION)
    full.setdefault("kind", "incident_manifest")
    full.setdefault("tables_version", tables.TABLES_VERSION)
    full.setdefault("created_unix_ns", time.time_ns())
    records.write_record(path / MANIFEST, full, "incident_manifest")
    return path / MANIFEST


def _safe_member(root: Path, rel: str, where: Path, what: str = "table path") -> Path:
    """Resolve a path named inside a manifest; refuse absolute paths, '..' and symlink escapes."""
    if "\x00" in rel:
        raise InputError(where, f"{what} {rel!r} contains a NUL byte")
    if os.path.isabs(rel) or ".." in Path(rel).parts:
        raise InputError(where, f"{what} {rel!r} escapes the incident directory")
    target = (root / rel)
    try:
        resolved, real_root = target.resolve(), root.resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: symlink loop (Python < 3.13)
        raise InputError(where, f"{what} {rel!r} cannot be resolved: symlink loop or unreadable ({exc})") from None
    try:
        resolved.relative_to(real_root)
    except ValueError:
        raise InputError(where, f"{what} {rel!r} resolves outside the incident directory (symlink?)") from None
    return target


def read_incident(path: str | os.PathLike, *, verify: bool = True) -> Incident:
    """Read and verify an incident directory: manifest schema, table digests, table schemas."""
    path = Path(path)
    manifest, paths = open_incident(path, verify=verify)
    loaded: dict[str, pa.Table] = {}
    for name, tpath in paths.items():
        table = tables.read_table(tpath, name)
        if table.num_rows != manifest["tables"][name]["rows"]:
            raise InputError(tpath, f"manifest says {manifest['tables'][name]['rows']} rows, file has {table.num_rows}")
        loaded[name] = table
    return Incident(path=path, manifest=manifest, tables=loaded)


def open_incident(path: Path, *, verify: bool = True) -> tuple[dict, dict[str, Path]]:
    """Every check of read_incident short of reading the tables' rows: (manifest, table name ->
    file). Digests, footers and the size cap are checked here; rows when they are read."""
    mpath = path / MANIFEST
    if not path.is_dir():
        raise InputError(path, "incident directory not found")
    if mpath.is_symlink():
        # The manifest decides which files are read and trusted: it must be the incident's own.
        _safe_member(path, MANIFEST, mpath, "manifest")
    manifest = records.read_record(mpath, "incident_manifest")
    bounds.identifier(manifest["incident_id"], "incident_id", mpath)
    bounds.version(manifest["tables_version"], "tables_version", mpath, tables.TABLES_VERSION)
    if manifest.get("window"):
        w = manifest["window"]
        bounds.window(w.get("start_ns", 0), w.get("end_ns", w.get("start_ns", 0)), "window", mpath)
    seen_paths: dict[str, str] = {}
    for name, entry in manifest["tables"].items():  # before any is read: one file is one table
        if name not in tables.TABLES:
            raise InputError(mpath, f"manifest names unknown table '{name}'")
        key = os.path.normpath(entry["path"])
        if key in seen_paths:
            raise InputError(mpath, f"tables '{seen_paths[key]}' and '{name}' name the same file {entry['path']!r}")
        seen_paths[key] = name
    total_bytes = 0
    paths: dict[str, Path] = {}
    for name, entry in manifest["tables"].items():
        if name not in tables.TABLES:
            raise InputError(mpath, f"manifest names unknown table '{name}'")
        tpath = _safe_member(path, entry["path"], mpath)
        if not os.path.lexists(tpath):
            raise InputError(tpath, f"table '{name}' named by the manifest is missing")
        safe_io.open_regular(tpath, max_bytes=bounds.MAX_ARTIFACT_BYTES).close()  # no FIFO, device or directory
        if verify:
            actual = hash_file(tpath)
            if actual != entry["digest"]:
                raise InputError(tpath, f"digest mismatch: manifest says {entry['digest']}, file hashes to {actual}")
        total_bytes += tables.footer_bytes(tpath, name)
        if total_bytes > bounds.MAX_INCIDENT_TABLE_BYTES:
            raise InputError(tpath, f"the incident's tables expand to more than {bounds.MAX_INCIDENT_TABLE_BYTES} bytes together")
        paths[name] = tpath
    return manifest, paths
