"""Preflight: on the node that runs a block, check that it is the planned environment.

Compares this node's environment fingerprint and every artifact digest with the plan,
field by field. Any difference blocks the block, unless the user named a new
experiment (`--config experiment=NAME`): then the record says `new_experiment`, names
the incident it derives from and lists every difference. It never proceeds silently,
and an experiment name once bound to one environment cannot be reused with another.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..core import atomic, environment, layout, records, typed
from ..plan.rebuild import trial_env
from ..plan.types import Plan, Source
from ..core.cas import CAS, hash_file
from ..core.errors import PreflightBlocked, StallcaseError
from .types import Preflight

REGISTRY = layout.REGISTRY  # results/<incident>/experiments.json


def check_artifacts(plan: Plan, cas: CAS) -> tuple[list[dict], list[dict]]:
    """(differences, missing) for the plan's artifacts on this node.

    Binaries and libraries must be at their recorded path with the recorded digest
    (that is what will run). Sources, inputs and patches must be in the store
    (verified) or at their path with the right digest.
    """
    diffs, missing = [], []
    for art in plan.artifacts:
        role, path, digest = art.role, art.path, art.digest
        present = os.path.isfile(path)
        actual = None
        if present:
            try:
                actual = hash_file(path)
            except OSError as exc:
                missing.append({"role": role, "path": path, "expected_digest": digest, "problem": f"unreadable: {exc}"})
                continue
        if role in ("binary", "library"):
            if not present:
                missing.append({"role": role, "path": path, "expected_digest": digest, "problem": "not at its recorded path"})
            elif actual != digest:
                diffs.append({"field": f"artifact.{role}:{path}", "planned": digest, "observed": actual})
        else:
            if cas.has(digest):
                try:
                    cas.get(digest)
                    continue
                except StallcaseError as exc:
                    missing.append({"role": role, "path": path, "expected_digest": digest, "problem": f"store copy corrupt: {exc.problem}"})
                    continue
            if not present:
                missing.append({"role": role, "path": path, "expected_digest": digest, "problem": "neither in the store nor at its path"})
            elif actual != digest:
                diffs.append({"field": f"artifact.{role}:{path}", "planned": digest, "observed": actual})
    for arm, spec in (("baseline", plan.arms.baseline), ("candidate", plan.arms.candidate)):
        for s in spec.sources or []:  # ABSENT: an arm planned with no source files
            if not cas.has(s.digest) and not (plan.source_root and _at(plan.source_root, s)):
                missing.append({"role": "source", "path": s.relpath, "expected_digest": s.digest, "problem": f"{arm} source not in the store"})
    return diffs, missing


# Run in the workload's own interpreter when it is not this one: the versions that matter
# are those the trial's `python` imports. Only importlib.metadata, no import of the packages.
_DIST_PROBE = ("import json, sys\nfrom importlib import metadata\nout = {}\n"
               "for n in json.loads(sys.argv[1]):\n"
               "    try:\n        out[n] = metadata.version(n)\n"
               "    except metadata.PackageNotFoundError:\n        out[n] = None\n"
               "print(json.dumps(out))\n")
PROBE_TIMEOUT_S = 60


def observed_distributions(python: str, names: list[str], env: dict) -> dict[str, str | None]:
    """Installed version of each distribution for the interpreter `python` (None: not installed)."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        from importlib import metadata

        out: dict[str, str | None] = {}
        for n in names:
            try:
                out[n] = metadata.version(n)
            except metadata.PackageNotFoundError:
                out[n] = None
        return out
    with tempfile.TemporaryDirectory(prefix="stallcase-probe-") as tmp:
        res = subprocess.run([python, "-c", _DIST_PROBE, json.dumps(names)], cwd=tmp, env=env, capture_output=True,
                             text=True, timeout=PROBE_TIMEOUT_S, check=False)
    if res.returncode != 0:
        raise OSError(f"{python} could not report its distributions: {(res.stderr.strip().splitlines() or ['exit ' + str(res.returncode)])[-1]}")
    data = json.loads(res.stdout)
    return {n: data.get(n) for n in names}


def check_distributions(plan: Plan) -> list[dict]:
    """A difference per Python distribution the workload imported whose version changed (or vanished)."""
    planned = plan.python_distributions
    if not planned:  # null: not observed at capture (ABSENT in a hand-written plan: the same)
        return []
    python = plan.workload.argv[0]
    try:
        seen = observed_distributions(python, sorted(planned), trial_env(plan.arms.baseline.env, {}))
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return [{"field": "python.distributions", "planned": f"{len(planned)} distributions",
                 "observed": f"not observed: {exc}"}]
    return [{"field": f"python.distribution:{n}", "planned": v, "observed": seen.get(n) or "not installed"}
            for n, v in sorted(planned.items()) if seen.get(n) != v]


def _at(root: str, s: Source) -> bool:
    p = os.path.join(root, s.relpath)
    return os.path.isfile(p) and hash_file(p) == s.digest


def registry_digest(env: dict) -> str:
    """The environment an experiment name is bound to: setup fields only. Commentary ("_...")
    and identity (INFO_FIELDS: which GPU of a model a block got) stay out, so blocks fanned
    out over identical GPUs are one experiment."""
    return records.digest_of({k: v for k, v in env.items()
                              if not k.startswith("_") and k not in environment.INFO_FIELDS})


@contextlib.contextmanager
def _locked(registry_path: Path):
    """An exclusive lock on the registry (a sibling .lock file, fcntl): blocks on several nodes
    of a shared file system, or several jobs of one node, preflight at once."""
    registry_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(registry_path.with_name(registry_path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _registry_check(registry_path: Path, experiment: str, env_digest: str, diffs: list[dict]) -> None:
    """Bind an experiment name to one environment; refuse reuse with another. Read, check and
    write happen under one lock, so of two blocks with different environments exactly one binds."""
    with _locked(registry_path):
        reg = {}
        if registry_path.is_file():
            try:
                reg = json.loads(registry_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise StallcaseError(registry_path, "experiment registry is not valid JSON") from None
            if not isinstance(reg, dict):
                raise StallcaseError(registry_path, "experiment registry is not a JSON object")
        bound = reg.get(experiment)
        if bound is not None and bound != env_digest:
            diffs.append({"field": "experiment", "planned": f"{experiment} bound to environment {bound}",
                          "observed": f"environment {env_digest}"})
            raise PreflightBlocked(registry_path, f"experiment name {experiment!r} was already used with a different environment; name a new experiment")
        if bound is None:
            reg[experiment] = env_digest
            atomic.write_text(registry_path, json.dumps(reg, indent=2, sort_keys=True) + "\n")


def preflight(plan: Plan, plan_digest: str, block: str, store_root: str | os.PathLike, *,
              results_dir: str | os.PathLike, observed_env: dict | None = None) -> dict:
    """The preflight record for `block` on this node (status pass, blocked or new_experiment)."""
    if block not in plan.schedule:
        raise StallcaseError(f"block {block}", "not in the plan's schedule")
    cas = CAS(store_root)
    env = observed_env if observed_env is not None else environment.fingerprint()
    diffs = environment.compare(plan.environment or {}, env)
    art_diffs, missing = check_artifacts(plan, cas)
    diffs += art_diffs
    diffs += check_distributions(plan)
    experiment = plan.experiment
    if experiment:
        # A named experiment runs on this node's interpreter and libraries: those that are
        # absent here are differences to list, not a reason to stop. Sources and inputs
        # are what the workload computes on: without them nothing can be rebuilt.
        for m in [m for m in missing if m["role"] in ("binary", "library")]:
            missing.remove(m)
            diffs.append({"field": f"artifact.{m['role']}:{m['path']}", "planned": m["expected_digest"], "observed": "missing"})
    status = "pass"
    if diffs or missing:
        status = "blocked"
        if experiment and not missing:
            status = "new_experiment"
    if experiment:
        env_digest = registry_digest(env)
        try:
            _registry_check(Path(results_dir) / REGISTRY, experiment, env_digest, diffs)
        except PreflightBlocked:
            status = "blocked"
    return Preflight(
        block=block,
        plan_digest=plan_digest,
        incident_id=plan.incident_id,
        experiment=experiment,
        node=socket.gethostname(),
        checked_unix_ns=time.time_ns(),
        status=status,
        differences=diffs,
        missing=missing,
        environment=env,
    ).to_json()


def readable_diff(record: dict) -> str:
    lines = [f"preflight {record['block']}: {record['status']} on {record['node']}"]
    for d in record["differences"]:
        lines.append(f"  {d['field']}: planned {d['planned']!r}, observed {d['observed']!r}")
    for m in record["missing"]:
        lines.append(f"  missing artifact: role={m['role']} path={m['path']} expected_digest={m['expected_digest']} ({m.get('problem', '')})")
    if record["status"] == "blocked":
        lines.append("  the trials would not run what the incident ran; fix the node, or name a new experiment with --config experiment=NAME")
    return "\n".join(lines)
