"""Rebuilding a planned arm on the node that runs it: its sources from the store, its environment.

The plan (build.py) says what to run, by digest; this module materializes it: an arm's work
directory rebuilt from the content-addressed store (`materialize_arm`), and a trial run's
environment, the node's own names beside the plan's allow-listed ones (`trial_env`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..core.cas import CAS, hash_file
from ..core.errors import MissingArtifact, StallcaseError
from .types import Plan, Source

# Environment variables the node provides at trial time, never taken from the plan:
# they describe where the job runs (the scheduler's GPU, the node's paths and libraries),
# not what it computes. The capture records CUDA_VISIBLE_DEVICES, LD_PRELOAD,
# LD_LIBRARY_PATH and PYTHONPATH for information; a plan copying them would time the
# captured GPU while preflight watches the allocated one, and would let a hostile manifest
# preload a library into every trial run. So the plan drops them and the runner never
# takes them from a plan, even a hand-edited one.
NODE_OWNED = ("CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH")
NODE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SLURM_JOB_ID", *NODE_OWNED)


def trial_env(plan_env: dict, extra: dict, node_env=None) -> dict:
    """A trial run's environment: the node's own NODE_ENV names, the plan's other names, then `extra`."""
    node = os.environ if node_env is None else node_env
    env = {k: node[k] for k in NODE_ENV if k in node}
    env.update({k: v for k, v in plan_env.items() if k not in NODE_ENV})
    env.update(extra)
    return env


def _materialize_sources(sources: list[Source], cas: CAS, dest: Path, fallback: dict[str, str] | None = None) -> None:
    for s in sources:
        target = safe_join(dest, s.relpath)
        target.parent.mkdir(parents=True, exist_ok=True)
        if cas.has(s.digest):
            shutil.copyfile(cas.get(s.digest), target)
        elif fallback and os.path.isfile(fallback.get(s.relpath, "")) and hash_file(fallback[s.relpath]) == s.digest:
            shutil.copyfile(fallback[s.relpath], target)
        else:
            raise MissingArtifact([("source", s.relpath, s.digest)])


def safe_join(root: Path, rel: str) -> Path:
    if os.path.isabs(rel) or ".." in Path(rel).parts:
        raise StallcaseError(rel, "source path escapes the work directory")
    return root / rel


def materialize_arm(plan: Plan, arm: str, store_root: str | os.PathLike, dest: str | os.PathLike) -> dict:
    """Rebuild an arm's work directory from the CAS; returns {argv, cwd, env} to run it.

    The argv entry that names a source file under the recorded source root is pointed at
    the rebuilt copy; so is the working directory when it was inside the source root.
    """
    cas, dest = CAS(store_root), Path(dest).resolve()
    spec = plan.arms.baseline if arm in ("A", "A'", "warmup") else plan.arms.candidate
    sources = spec.sources or []  # ABSENT: an arm planned with no source files
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    root = plan.source_root or None
    fallback = {s.relpath: os.path.join(root, s.relpath) for s in sources} if root else None
    _materialize_sources(sources, cas, dest, fallback)
    def remap(p: str) -> str:
        if root and os.path.isabs(p):
            try:
                rel = Path(p).relative_to(root)
            except ValueError:
                return p
            return str(safe_join(dest, rel.as_posix())) if rel.parts else str(dest)
        return p
    rel_sources = {s.relpath for s in sources}
    argv = []
    for a in spec.argv:
        cand = remap(a)
        if cand != a and Path(cand).relative_to(dest).as_posix() in rel_sources:
            argv.append(cand)
        elif root and not os.path.isabs(a) and a in rel_sources and plan.workload.cwd == root:
            argv.append(str(dest / a))
        else:
            argv.append(a)
    # The cwd inside the source tree maps to the same place in the rebuilt tree (made when no
    # pinned file lives there, e.g. an untracked runs/ directory); outside it, it stays as recorded.
    cwd = remap(plan.workload.cwd)
    if cwd != plan.workload.cwd:
        os.makedirs(cwd, exist_ok=True)
    elif not os.path.isdir(cwd):
        cwd = str(dest)
    return {"argv": argv, "cwd": cwd, "env": dict(spec.env)}
