"""Rule entry of `snapshot` (rules/snapshot.smk): an incident directory -> its tables and artifacts
in the store, and results/<incident>/snapshot.json."""

from __future__ import annotations

import os

from .build import ingest


def run(incident_dir: str | os.PathLike, store_root: str | os.PathLike, out_path: str | os.PathLike, *,
        allow_roots=None) -> dict:
    """Ingest the incident (build.ingest, which `stallcase ingest` calls too) and write the record."""
    return ingest(incident_dir, store_root, out_path, allow_roots=allow_roots)
