"""Snapshot stage: ingest an incident directory into the content-addressed store.

The snapshot record (results/<incident>/snapshot.json) indexes the incident's tables
and artifacts by digest. Sources, inputs and patches are copied into the store (they
are what reconstruction needs); binaries and libraries are environment, so they are
verified in place by digest and stored only when `store_roles` says so. Anything the
manifest names that is neither in the store nor at its recorded path with the right
digest blocks the stage: one line per artifact, and no record is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import records
from .cas import CAS, hash_file
from .errors import InputError, MissingArtifact
from .incident import MANIFEST, check_incident_id, read_incident

DEFAULT_STORE_ROLES = ("source", "input", "patch")


def resolve_artifacts(artifacts: list[dict], cas: CAS, store_roles=DEFAULT_STORE_ROLES) -> list[dict]:
    """Check every artifact; store those of `store_roles`. Returns entries with `stored` flags.

    Raises MissingArtifact naming every artifact that is missing or changed.
    """
    missing: list[tuple[str, str, str]] = []
    to_store = []
    for art in artifacts:
        role, path, digest = art["role"], art["path"], art["digest"]
        in_store = cas.has(digest)
        at_path = False
        if os.path.isfile(path):
            try:
                at_path = hash_file(path) == digest
            except OSError:
                at_path = False
        if not (in_store or at_path):
            missing.append((role, path, digest))
        elif role in store_roles and not in_store:
            to_store.append(art)
    # Check everything before storing anything: a blocked ingest leaves the store as it was.
    if missing:
        raise MissingArtifact(missing)
    for art in to_store:
        if cas.put_file(art["path"]) != art["digest"]:  # changed between the check and the copy
            missing.append((art["role"], art["path"], art["digest"]))
    if missing:
        raise MissingArtifact(missing)
    return [dict(a) for a in artifacts]


def ingest(incident_path: str | os.PathLike, store_root: str | os.PathLike, out_path: str | os.PathLike,
           *, store_roles=DEFAULT_STORE_ROLES) -> dict:
    """Ingest `incident_path` into the store at `store_root` and write the snapshot record."""
    incident = read_incident(incident_path)
    m = incident.manifest
    check_incident_id(m["incident_id"], str(Path(incident_path) / MANIFEST))
    cas = CAS(store_root)
    # Digests read_incident just verified; the record is validated before anything is
    # stored, so a refused incident leaves neither objects nor a record behind.
    manifest_digest = hash_file(Path(incident_path) / MANIFEST)
    tables = {name: {"digest": entry["digest"], "rows": entry["rows"]} for name, entry in m["tables"].items()}
    record = {
        "schema_version": 1,
        "kind": "snapshot",
        "incident_id": m["incident_id"],
        "manifest_digest": manifest_digest,
        "created_unix_ns": m["created_unix_ns"],
        "reason": m["reason"],
        "producer": m.get("producer", "unknown"),
        "clock": m["clock"],
        "window": m.get("window"),
        "ranks": m.get("ranks", []),
        "sources": m["sources"],
        "tables": tables,
        "artifacts": [dict(a) for a in m.get("artifacts", [])],
        "provenance": m.get("provenance", {}),
        "workload": m.get("workload"),
        "recorder": m.get("recorder"),
    }
    records.validate(record, "snapshot", where=out_path)
    resolve_artifacts(m.get("artifacts", []), cas, store_roles)
    stored = {"manifest": (cas.put_file(Path(incident_path) / MANIFEST), manifest_digest)}
    for name, entry in m["tables"].items():
        stored[name] = (cas.put_file(Path(incident_path) / entry["path"]), entry["digest"])
    changed = [name for name, (got, want) in stored.items() if got != want]
    if changed:  # the file changed between verification and the copy into the store
        raise InputError(Path(incident_path), f"{', '.join(changed)} changed while being ingested; ingest again")
    records.write_record(out_path, record, "snapshot")
    return record


def load_tables(snapshot: dict, store_root: str | os.PathLike):
    """The snapshot's tables back from the store (digest-verified) as an Incident-like object."""
    from . import tables as T
    from .incident import Incident

    cas = CAS(store_root)
    loaded = {name: T.read_table(cas.get(e["digest"]), name) for name, e in snapshot["tables"].items()}
    manifest = records.parse_record(cas.get_bytes(snapshot["manifest_digest"]), "incident_manifest",
                                    f"store object {snapshot['manifest_digest']} (manifest)")
    return Incident(path=Path(store_root), manifest=manifest, tables=loaded)
