"""Regression plan: what the trials run, pinned by digest (rebuild.py rebuilds it on a node).

The plan names the incident's artifacts (source, binaries, libraries, inputs) by blake3
digest, the workload as an argv list (never a shell string) with an allow-listed
environment, the baseline and the candidate arm, and the trial design with its seeded
schedule. Its identity is the digest of its canonical JSON; it is also stored in the CAS.

A candidate is resolved to digests when the plan is made: argument and environment
changes are applied to the argv/env, and a patch or git ref is applied to the baseline
sources here, so the candidate's files are stored and pinned before any trial runs.
"""

from __future__ import annotations

import os
from typing import Any

from ..core import records
from ..core.cas import CAS
from ..core.errors import MissingArtifact, StallcaseError
from . import candidate as candidate_lib
from ..capture.provenance import allowed_env
from .metric import resolve as resolve_metric
from .rebuild import NODE_ENV
from .types import Arms, Artifact, Design, Plan, Workload
from .schedule import make_schedule
from . import stopping

def _plan_env(env: dict) -> dict:
    return {k: v for k, v in allowed_env(env).items() if k not in NODE_ENV}


def _sources(artifacts: list[dict]) -> list[dict]:
    return sorted(({"relpath": a["relpath"], "digest": a["digest"]} for a in artifacts
                   if a["role"] == "source" and a.get("relpath")), key=lambda s: s["relpath"])


def _base_tree(sources: list[dict], cas: CAS) -> dict[str, bytes]:
    """The baseline's files from the store (never from the incident's recorded source root)."""
    missing = [("source", s["relpath"], s["digest"]) for s in sources if not cas.has(s["digest"])]
    if missing:
        raise MissingArtifact(missing)
    return {s["relpath"]: cas.get_bytes(s["digest"]) for s in sources}


def _candidate_sources(base_sources: list[dict], cas: CAS, candidate: dict,
                       source_repo: str | None, prefix: str = "") -> tuple[list[dict], dict, list[bytes]]:
    """Apply a patch or a git ref to the baseline tree; (sources, changes-record, files to store).

    Nothing is stored here: the caller stores the files once the whole plan is accepted.
    """
    patch, git_ref = candidate.get("patch"), candidate.get("git_ref")
    if not patch and not git_ref:
        return base_sources, {}, []
    if patch and git_ref:
        raise StallcaseError("candidate", "give a patch or a git_ref, not both")
    base = _base_tree(base_sources, cas)
    if git_ref:
        repo = candidate.get("repo") or source_repo
        if not repo:
            raise StallcaseError("candidate.git_ref", "name the repository to read it from: candidate.repo or the "
                                 "top-level source_repo key (the incident's recorded source root is never used: an "
                                 "incident is untrusted data, and git in its repository could run its filters)")
        commit, ref_files, skipped = candidate_lib.read_git_ref(os.path.abspath(os.path.expanduser(str(repo))), str(git_ref), prefix)
        files = dict(base)
        files.update(ref_files)  # the ref's tree over the pinned one: files it lacks stay as pinned
        changes = {"git_ref": commit}
        if skipped:
            changes["skipped_submodules"] = skipped
        if files == base:
            raise StallcaseError("candidate.git_ref", f"{git_ref} ({commit[:12]}) has the same files as the pinned sources: refused")
        return candidate_lib.tree_sources(files), changes, list(files.values())
    files, patch_bytes = candidate_lib.apply_patch(base, str(patch))
    return candidate_lib.tree_sources(files), {"patch_digest": candidate_lib.hash_bytes(patch_bytes)}, [*files.values(), patch_bytes]


def build_plan(snapshot: dict, snapshot_digest: str, store_root: str | os.PathLike, *, design: dict,
               candidate: Any, experiment: str | None = None, source_repo: str | None = None) -> Plan:
    """The plan record for `snapshot`. `candidate` is "baseline" (A/A) or a dict of changes;
    `source_repo` is the user's repository a `git_ref` is read from (config `source_repo`)."""
    workload = snapshot.get("workload")
    if not workload:
        raise StallcaseError("snapshot.workload", f"incident {snapshot['incident_id']} recorded no workload command; a plan needs one (capture it with the recorder or `stallcase record`)")
    # The manifest is outside input: only allow-listed variables reach a trial, whatever it says.
    workload = dict(workload, env=_plan_env(workload["env"]))
    cas = CAS(store_root)
    base_sources = _sources(snapshot["artifacts"])
    source_root = (snapshot.get("provenance", {}).get("source") or {}).get("root")
    baseline = {"argv": list(workload["argv"]), "env": dict(workload["env"]), "changes": {},
                "same_as_baseline": True, "sources": base_sources}
    if candidate is None:
        raise StallcaseError("candidate", f"no candidate for incident {snapshot['incident_id']}: write `candidate:` "
                             "(set_args, remove_args, append_args, env, patch or git_ref) in your --configfile, or "
                             "--config candidate=baseline for an A/A experiment")
    if candidate == "baseline":
        cand = dict(baseline, changes={})
    else:
        if not isinstance(candidate, dict):
            raise StallcaseError("candidate", f"expected 'baseline' or a mapping of changes, got {candidate!r}")
        prefix = (snapshot.get("provenance", {}).get("source") or {}).get("prefix") or ""
        srcs, src_changes, to_store = _candidate_sources(base_sources, cas, candidate, source_repo, str(prefix))
        env = dict(workload["env"])
        env.update({str(k): str(v) for k, v in candidate.get("env", {}).items()})
        refused = sorted(set(env) - set(allowed_env(env)))
        if refused:
            raise StallcaseError("candidate.env", f"variables outside the allow-list would not reach the workload: {', '.join(refused)}")
        owned = sorted(set(env) & set(NODE_ENV))
        if owned:
            raise StallcaseError("candidate.env", f"{', '.join(owned)}: the node's own (its GPU, paths and libraries), never set from a plan")
        argv = candidate_lib.apply_arg_changes(workload["argv"], candidate)
        changes = {k: candidate[k] for k in ("set_args", "remove_args", "append_args", "env") if candidate.get(k)}
        changes.update(src_changes)
        same = argv == baseline["argv"] and env == baseline["env"] and srcs == base_sources
        if same:  # an accidental A/A would be reported as "no change" of a fix that never ran
            raise StallcaseError("candidate", "changes nothing: its argv, environment and sources equal the "
                                 "baseline's; fix the candidate, or run an A/A on purpose with --config candidate=baseline")
        cand = {"argv": argv, "env": env, "changes": changes, "sources": srcs, "same_as_baseline": False}
        candidate_lib.store_blobs(to_store, cas)  # every check passed: only now the candidate's files are stored
    env_fp = snapshot.get("provenance", {}).get("environment") or {}
    design = dict(design, metric=resolve_metric(design["metric"], snapshot, store_root,
                                                arms={"baseline": baseline, "candidate": cand}))
    stop = stopping.design(design)  # the sequential design's looks, fixed before any run
    for key in ("stop", "wave_blocks", "min_effect_pct"):
        design.pop(key, None)
    if stop is not None:
        design["stop"] = stop.to_json()  # Design.from_json below reads it back as the Stop
    dists = snapshot.get("provenance", {}).get("imported_distributions")
    return Plan(
        incident_id=snapshot["incident_id"],
        experiment=experiment,
        snapshot_digest=snapshot_digest,
        artifacts=[Artifact.from_json(a) for a in snapshot["artifacts"]],
        workload=Workload.from_json(workload),
        source_root=source_root,
        arms=Arms.from_json({"baseline": baseline, "candidate": cand}),
        design=Design.from_json(design),
        schedule=make_schedule(design),
        environment=env_fp,
        python_distributions=dict(dists) if isinstance(dists, dict) else None,
    )


def write_plan(plan: Plan, out_path: str | os.PathLike, store_root: str | os.PathLike) -> str:
    """Write plan.json and store the same canonical bytes in the CAS; returns the plan digest."""
    record = plan.to_json()
    digest = records.write_record(out_path, record, "plan")
    stored = CAS(store_root).put_bytes(records.canonical_bytes(record))
    assert stored == digest, "canonical bytes and record digest disagree"
    return digest


def configured_candidate(config: dict):
    """The candidate a workflow run means: the config's `candidate` as given (a user's own
    config file replaces the built-in one, never merges with it), else the demo's
    `demo.candidate` for incident=demo, else None (the plan then refuses, saying what to write)."""
    if config.get("candidate") is not None:
        return config["candidate"]
    if config.get("incident") == "demo":
        return (config.get("demo") or {}).get("candidate", "baseline")
    return None


