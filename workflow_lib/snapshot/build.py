"""Snapshot stage: ingest an incident directory into the content-addressed store.

The snapshot record (results/<incident>/snapshot.json) indexes the incident's tables
and artifacts by digest. Sources, inputs and patches are copied into the store (they
are what reconstruction needs); binaries and libraries are environment, so they are
verified in place by digest and stored only when `store_roles` says so. Anything the
manifest names that is neither in the store nor at its recorded path with the right
digest blocks the stage: one line per artifact, and no record is written.

An incident is untrusted data (docs/security.md): an artifact is copied into the store
only from inside the incident directory or a root the user declared (`allow_roots`; the
working directory counts as one), only when it is a regular file of the size the
manifest records, and only up to bounds.MAX_ARTIFACT_BYTES. Environment artifacts
(binaries, libraries) are verified in place and may live anywhere, under the same
regular-file and size rules, so a FIFO or a sparse 1 TB file is refused, never read.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core import bounds, records, safe_io
from ..core.cas import CAS, hash_file
from ..core.errors import InputError, MissingArtifact
from ..core.incident import MANIFEST, check_incident_id, read_incident
from .types import Snapshot

DEFAULT_STORE_ROLES = ("source", "input", "patch")


def _at_path(art: dict, stored: bool, incident_root: Path | None, roots: list[Path], where) -> bool | str:
    """True when the artifact's file is there with its digest, False when it is not there, or
    what differs (its size, its digest) when it is there but changed. Refuses (InputError)
    paths an incident may not make us read, and files that are not regular."""
    path = art["path"]
    bounds.text(path, "artifact path", where)
    if stored and incident_root is not None:
        safe_io.check_readable_from(path, incident_root, roots, where)
    try:
        with safe_io.open_regular(path, path, max_bytes=bounds.MAX_ARTIFACT_BYTES) as fh:
            size = os.fstat(fh.fileno()).st_size
    except InputError as exc:
        if exc.problem == "file not found":
            return False
        raise
    if size != art.get("size", size):  # cannot have the digest: not worth reading
        return f"present but {size} bytes, the manifest records {art['size']}"
    try:
        got = hash_file(path)
    except OSError as exc:
        return f"present but unreadable ({exc.strerror or exc})"
    return True if got == art["digest"] else f"present but its content hashes to {got}, not to the recorded digest"


def resolve_artifacts(artifacts: list[dict], cas: CAS, store_roles=DEFAULT_STORE_ROLES, *,
                      incident_root: str | os.PathLike | None = None, allow_roots=None,
                      where: str | os.PathLike = "manifest") -> list[dict]:
    """Check every artifact; store those of `store_roles`. Returns entries with `stored` flags.

    Raises MissingArtifact naming every artifact that is missing or changed.
    """
    roots = safe_io.declared_roots(allow_roots or ())
    root = Path(incident_root) if incident_root is not None else None
    missing: list[tuple[str, str, str]] = []
    changed: dict[str, str] = {}
    to_store = []
    seen: set[str] = set()
    for art in artifacts:
        role, path, digest = art["role"], art["path"], art["digest"]
        if (role, path) in seen:
            raise InputError(where, f"artifact {path} (role {role}) is listed twice")
        seen.add((role, path))
        in_store = cas.has(digest)
        stored = role in store_roles
        # Checked even when the object is in the store: an incident may not name files it cannot read.
        at_path = _at_path(art, stored, root, roots, where)
        if isinstance(at_path, str):
            changed[path], at_path = at_path, False
        if not (in_store or at_path):
            missing.append((role, path, digest))
        elif stored and not in_store:
            to_store.append(art)
    # Check everything before storing anything: a blocked ingest leaves the store as it was.
    if missing:
        raise MissingArtifact(missing, changed)
    for art in to_store:
        if cas.put_file(art["path"]) != art["digest"]:  # changed between the check and the copy
            missing.append((art["role"], art["path"], art["digest"]))
    if missing:
        raise MissingArtifact(missing)
    return [dict(a) for a in artifacts]


def snapshot_record(incident_path: str | os.PathLike, manifest: dict) -> dict:
    """The snapshot record of an incident directory whose manifest (as read_incident read it)
    is `manifest`: what ingest writes, made from the manifest alone (no store, no tables read)."""
    m = manifest
    return Snapshot(
        incident_id=m["incident_id"],
        manifest_digest=hash_file(Path(incident_path) / MANIFEST),
        created_unix_ns=m["created_unix_ns"],
        reason=m["reason"],
        producer=m.get("producer", "unknown"),
        clock=m["clock"],
        window=m.get("window"),
        ranks=m.get("ranks", []),
        sources=m["sources"],
        tables={name: {"digest": entry["digest"], "rows": entry["rows"]} for name, entry in m["tables"].items()},
        artifacts=[dict(a) for a in m.get("artifacts", [])],
        provenance=m.get("provenance", {}),
        workload=m.get("workload"),
        recorder=m.get("recorder"),
        job=m.get("job"),
    ).to_json()


def snapshot_digest(incident_path: str | os.PathLike, manifest: dict) -> str:
    """An incident's `snapshot_digest`: records.digest_of its snapshot record, the one meaning
    the name has in every record (plan, diagnosis). For an incident directory diagnosed
    without ingesting it, the digest its snapshot record has once ingested."""
    return records.digest_of(snapshot_record(incident_path, manifest))


def ingest(incident_path: str | os.PathLike, store_root: str | os.PathLike, out_path: str | os.PathLike,
           *, store_roles=DEFAULT_STORE_ROLES, allow_roots=None) -> dict:
    """Ingest `incident_path` into the store at `store_root` and write the snapshot record.

    `allow_roots`: directories (besides the incident and the working directory) that the
    incident's sources and inputs may be read from."""
    incident = read_incident(incident_path)
    m = incident.manifest
    mpath = Path(incident_path) / MANIFEST
    check_incident_id(m["incident_id"], str(mpath))
    dir_name = Path(incident_path).resolve().name
    if m["incident_id"] != dir_name:
        raise InputError(mpath, f"incident_id {m['incident_id']!r} differs from its directory's name {dir_name!r}")
    cas = CAS(store_root)
    # Digests read_incident just verified; the record is validated before anything is
    # stored, so a refused incident leaves neither objects nor a record behind.
    record = snapshot_record(incident_path, m)
    manifest_digest = record["manifest_digest"]
    records.validate(record, "snapshot", where=out_path)
    # What could fail after objects are stored is checked before any is: the record's path
    # (not a directory, FIFO or link) and the store's directories (no prefix that is a file).
    # So a refused ingest leaves no object that nothing references.
    safe_io.check_output_file(out_path)
    for parent in Path(out_path).parents:
        if os.path.lexists(parent) and not os.path.isdir(parent):
            raise InputError(parent, "is not a directory: cannot hold the snapshot record")
    cas.check_writable([manifest_digest, *(e["digest"] for e in m["tables"].values()),
                        *(a["digest"] for a in m.get("artifacts", []) if a["role"] in store_roles)])
    resolve_artifacts(m.get("artifacts", []), cas, store_roles, incident_root=incident_path,
                      allow_roots=allow_roots, where=mpath)
    stored = {"manifest": (cas.put_file(Path(incident_path) / MANIFEST), manifest_digest)}
    for name, entry in m["tables"].items():
        stored[name] = (cas.put_file(Path(incident_path) / entry["path"]), entry["digest"])
    changed = [name for name, (got, want) in stored.items() if got != want]
    if changed:  # the file changed between verification and the copy into the store
        raise InputError(Path(incident_path), f"{', '.join(changed)} changed while being ingested; ingest again")
    records.write_record(out_path, record, "snapshot")
    return record


def load_tables(snapshot: dict, store_root: str | os.PathLike):
    """The snapshot's tables back from the store (digest-verified) as an Incident.

    Its `path` is the snapshot record's place in the results tree that holds the store
    (layout.snapshot: the store lives at <results>/cas/): the file errors name, and what tells
    this incident from another in one analysis. Never the store root, which every incident shares."""
    from ..core import layout
    from ..core import tables as T
    from ..core.incident import Incident

    cas = CAS(store_root)
    loaded = {name: T.read_table(cas.get(e["digest"]), name) for name, e in snapshot["tables"].items()}
    manifest = records.parse_record(cas.get_bytes(snapshot["manifest_digest"]), "incident_manifest",
                                    f"store object {snapshot['manifest_digest']} (manifest)")
    return Incident(path=Path(layout.snapshot(str(store_root), snapshot["incident_id"])), manifest=manifest, tables=loaded)
