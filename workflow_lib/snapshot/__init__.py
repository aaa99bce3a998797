"""Snapshot stage: an incident directory -> its tables and artifacts in the store.

In: incidents/<incident>/manifest.json and what it names. Out: results/<incident>/snapshot.json
(schemas/snapshot.schema.json). Run by rule `snapshot` (rules/snapshot.smk) through rule.run
(build.ingest, which `stallcase ingest` calls too).
verify.py checks a whole results tree and its store afterwards (`stallcase verify`).
"""
