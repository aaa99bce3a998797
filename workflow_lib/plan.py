"""Regression plan: what the trials run, pinned by digest, and how to rebuild it.

The plan names the incident's artifacts (source, binaries, libraries, inputs) by blake3
digest, the workload as an argv list (never a shell string) with an allow-listed
environment, the baseline and the candidate arm, and the trial design with its seeded
schedule. Its identity is the digest of its canonical JSON; it is also stored in the CAS.

A candidate is resolved to digests when the plan is made: argument and environment
changes are applied to the argv/env, and a patch or git ref is applied to the baseline
sources here, so the candidate's files are stored and pinned before any trial runs.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from . import records
from .cas import CAS, hash_file
from .errors import MissingArtifact, StallcaseError
from .capture.provenance import allowed_env
from .metric import resolve as resolve_metric
from .schedule import make_schedule

# Environment variables the node provides at trial time, never taken from the plan:
# they describe where the job runs (scheduler-assigned GPU, paths), not what it computes.
NODE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID")


def _apply_arg_changes(argv: list[str], changes: dict) -> list[str]:
    """set_args {flag: value} replaces the value after `flag` (or `flag=value`), appending when absent;
    remove_args drops a flag (and its value when set_args-style); append_args adds at the end."""
    out = list(argv)
    for flag in changes.get("remove_args", []):
        i = 0
        while i < len(out):
            if out[i] == flag:
                has_value = i + 1 < len(out) and not out[i + 1].startswith("-")
                del out[i: i + (2 if has_value else 1)]
            elif out[i].startswith(flag + "="):
                del out[i]
            else:
                i += 1
    for flag, value in changes.get("set_args", {}).items():
        value = str(value)
        for i, a in enumerate(out):
            if a == flag and i + 1 < len(out):
                out[i + 1] = value
                break
            if a.startswith(flag + "="):
                out[i] = f"{flag}={value}"
                break
        else:
            out += [flag, value]
    out += [str(a) for a in changes.get("append_args", [])]
    return out


def _sources(artifacts: list[dict]) -> list[dict]:
    return sorted(({"relpath": a["relpath"], "digest": a["digest"]} for a in artifacts
                   if a["role"] == "source" and a.get("relpath")), key=lambda s: s["relpath"])


def _materialize_sources(sources: list[dict], cas: CAS, dest: Path, fallback: dict[str, str] | None = None) -> None:
    for s in sources:
        target = _safe_join(dest, s["relpath"])
        target.parent.mkdir(parents=True, exist_ok=True)
        if cas.has(s["digest"]):
            shutil.copyfile(cas.get(s["digest"]), target)
        elif fallback and os.path.isfile(fallback.get(s["relpath"], "")) and hash_file(fallback[s["relpath"]]) == s["digest"]:
            shutil.copyfile(fallback[s["relpath"]], target)
        else:
            raise MissingArtifact([("source", s["relpath"], s["digest"])])


def _safe_join(root: Path, rel: str) -> Path:
    if os.path.isabs(rel) or ".." in Path(rel).parts:
        raise StallcaseError(rel, "source path escapes the work directory")
    return root / rel


def _store_tree(root: Path, cas: CAS) -> list[dict]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".git" not in p.relative_to(root).parts:
            out.append({"relpath": p.relative_to(root).as_posix(), "digest": cas.put_file(p)})
    return out


def _candidate_sources(base_sources: list[dict], cas: CAS, candidate: dict, source_root: str | None) -> tuple[list[dict], dict]:
    """Apply a patch or a git ref to the baseline sources; return (sources, changes-record)."""
    patch, git_ref = candidate.get("patch"), candidate.get("git_ref")
    if not patch and not git_ref:
        return base_sources, {}
    with tempfile.TemporaryDirectory(prefix="stallcase-cand-") as tmp:
        work = Path(tmp)
        if git_ref:
            if not source_root:
                raise StallcaseError("candidate.git_ref", "the snapshot records no git source root to resolve the ref in")
            rev = subprocess.run(["git", "-C", source_root, "rev-parse", "--verify", f"{git_ref}^{{commit}}"],
                                 capture_output=True, text=True, check=False)
            if rev.returncode != 0:
                raise StallcaseError("candidate.git_ref", f"cannot resolve {git_ref!r} in {source_root}: {rev.stderr.strip()}")
            commit = rev.stdout.strip()
            relpaths = [s["relpath"] for s in base_sources]
            arch = subprocess.run(["git", "-C", source_root, "archive", "--format=tar", commit, "--", *relpaths],
                                  capture_output=True, check=False)
            if arch.returncode != 0:
                raise StallcaseError("candidate.git_ref", f"git archive failed: {arch.stderr.decode(errors='replace').strip()}")
            with tarfile.open(fileobj=io.BytesIO(arch.stdout)) as tf:
                tf.extractall(work, filter="data")  # 'data' refuses links and paths that escape
            changes = {"git_ref": commit}
        else:
            _materialize_sources(base_sources, cas, work)
            patch_path = Path(patch)
            if not patch_path.is_file():
                raise StallcaseError(patch, "candidate patch file not found")
            res = subprocess.run(["git", "apply", str(patch_path.resolve())],
                                 cwd=work, capture_output=True, text=True, check=False)
            if res.returncode != 0:
                raise StallcaseError(patch, f"patch does not apply to the incident's sources: {res.stderr.strip()}")
            changes = {"patch_digest": cas.put_file(patch_path)}
        return _store_tree(work, cas), changes


def build_plan(snapshot: dict, snapshot_digest: str, store_root: str | os.PathLike, *, design: dict,
               candidate: Any, experiment: str | None = None) -> dict:
    """The plan record for `snapshot`. `candidate` is "baseline" (A/A) or a dict of changes."""
    workload = snapshot.get("workload")
    if not workload:
        raise StallcaseError("snapshot.workload", f"incident {snapshot['incident_id']} recorded no workload command; a plan needs one (capture it with the recorder or `stallcase record`)")
    # The manifest is outside input: only allow-listed variables reach a trial, whatever it says.
    workload = dict(workload, env=allowed_env(workload["env"]))
    cas = CAS(store_root)
    base_sources = _sources(snapshot["artifacts"])
    source_root = (snapshot.get("provenance", {}).get("source") or {}).get("root")
    baseline = {"argv": list(workload["argv"]), "env": dict(workload["env"]), "changes": {},
                "same_as_baseline": True, "sources": base_sources}
    if candidate in (None, "baseline"):
        cand = dict(baseline, changes={})
    else:
        if not isinstance(candidate, dict):
            raise StallcaseError("candidate", f"expected 'baseline' or a mapping of changes, got {candidate!r}")
        srcs, src_changes = _candidate_sources(base_sources, cas, candidate, source_root)
        env = dict(workload["env"])
        env.update({str(k): str(v) for k, v in candidate.get("env", {}).items()})
        refused = sorted(set(env) - set(allowed_env(env)))
        if refused:
            raise StallcaseError("candidate.env", f"variables outside the allow-list would not reach the workload: {', '.join(refused)}")
        argv = _apply_arg_changes(workload["argv"], candidate)
        changes = {k: candidate[k] for k in ("set_args", "remove_args", "append_args", "env") if candidate.get(k)}
        changes.update(src_changes)
        cand = {"argv": argv, "env": env, "changes": changes, "sources": srcs,
                "same_as_baseline": argv == baseline["argv"] and env == baseline["env"] and srcs == base_sources}
    env_fp = snapshot.get("provenance", {}).get("environment") or {}
    design = dict(design, metric=resolve_metric(design["metric"], snapshot))
    plan = {
        "schema_version": 1,
        "kind": "plan",
        "incident_id": snapshot["incident_id"],
        "experiment": experiment,
        "snapshot_digest": snapshot_digest,
        "artifacts": snapshot["artifacts"],
        "workload": workload,
        "source_root": source_root,
        "arms": {"baseline": baseline, "candidate": cand},
        "design": design,
        "schedule": make_schedule(design),
        "environment": env_fp,
    }
    return plan


def write_plan(plan: dict, out_path: str | os.PathLike, store_root: str | os.PathLike) -> str:
    """Write plan.json and store the same canonical bytes in the CAS; returns the plan digest."""
    digest = records.write_record(out_path, plan, "plan")
    stored = CAS(store_root).put_bytes(records.canonical_bytes(plan))
    assert stored == digest, "canonical bytes and record digest disagree"
    return digest


def materialize_arm(plan: dict, arm: str, store_root: str | os.PathLike, dest: str | os.PathLike) -> dict:
    """Rebuild an arm's work directory from the CAS; returns {argv, cwd, env} to run it.

    The argv entry that names a source file under the recorded source root is pointed at
    the rebuilt copy; so is the working directory when it was inside the source root.
    """
    cas, dest = CAS(store_root), Path(dest).resolve()
    spec = plan["arms"]["baseline" if arm in ("A", "A'", "warmup") else "candidate"]
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    root = plan.get("source_root")
    fallback = {s["relpath"]: os.path.join(root, s["relpath"]) for s in spec.get("sources", [])} if root else None
    _materialize_sources(spec.get("sources", []), cas, dest, fallback)
    def remap(p: str) -> str:
        if root and os.path.isabs(p):
            try:
                rel = Path(p).relative_to(root)
            except ValueError:
                return p
            return str(dest / rel)
        return p
    rel_sources = {s["relpath"] for s in spec.get("sources", [])}
    argv = []
    for a in spec["argv"]:
        cand = remap(a)
        if cand != a and Path(cand).relative_to(dest).as_posix() in rel_sources:
            argv.append(cand)
        elif root and not os.path.isabs(a) and a in rel_sources and plan["workload"]["cwd"] == root:
            argv.append(str(dest / a))
        else:
            argv.append(a)
    cwd = remap(plan["workload"]["cwd"])
    if not os.path.isdir(cwd):
        cwd = str(dest)
    return {"argv": argv, "cwd": cwd, "env": dict(spec["env"])}


def plan_from_snapshot_file(snapshot_path, store_root, out_path, *, design: dict, candidate, experiment=None) -> str:
    """Rule entry: read the snapshot record, build and write the plan; returns its digest."""
    snapshot = records.read_record(snapshot_path, "snapshot")
    plan = build_plan(snapshot, records.digest_of(snapshot), store_root, design=dict(design),
                      candidate=candidate, experiment=experiment)
    return write_plan(plan, out_path, store_root)
