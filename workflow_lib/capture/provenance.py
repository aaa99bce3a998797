"""Process provenance, gathered at snapshot time on the writer thread (never the hot path).

What is recorded: argv, cwd, executable, Python version and installed packages
(importlib.metadata), shared libraries mapped in the process (/proc/<pid>/maps), the git
commit, tree, dirty state and diff digest of the source root, and declared inputs and
sources. Artifacts (binary, libraries, sources, inputs) carry blake3 digests; digests are
cached by (path, size, mtime_ns) so repeated snapshots do not re-hash unchanged files.

Environment variables: only names on ENV_ALLOW (exact) or with a prefix in
ENV_ALLOW_PREFIXES are recorded, because the rest may hold secrets and do not change
performance in ways we can re-create:
  CUDA_VISIBLE_DEVICES, CUDA_LAUNCH_BLOCKING, CUDA_DEVICE_MAX_CONNECTIONS,
  CUDA_MODULE_LOADING, OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS,
  PYTHONHASHSEED, PYTORCH_CUDA_ALLOC_CONF, LD_PRELOAD, and every NCCL_*, TORCH_*,
  CUBLAS_*, CUDNN_*, NVIDIA_TF32_*, XLA_*, TF_* variable.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import threading
from pathlib import Path

import blake3

from ..cas import hash_file
from ..environment import fingerprint

ENV_ALLOW = frozenset({
    "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PYTHONHASHSEED",
    "PYTORCH_CUDA_ALLOC_CONF", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH",
    "STALLCASE_RECORDER_MODE",  # the recorder's mode changes what a run costs (capture/recorder.py MODES)
})
ENV_ALLOW_PREFIXES = ("NCCL_", "TORCH_", "CUBLAS_", "CUDNN_", "NVIDIA_TF32_", "XLA_", "TF_")
# Terraform's TF_CLI_* / TF_VAR_* share TensorFlow's prefix and say nothing about the workload.
ENV_DENY_PREFIXES = ("TF_CLI_", "TF_VAR_", "TF_TOKEN_")
GIT_TIMEOUT_S = 10.0

_digest_cache: dict[tuple[str, int, int], str] = {}
_cache_lock = threading.Lock()
_packages_cache: dict[str, str] | None = None


def allowed_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items())
            if (k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES)) and not k.startswith(ENV_DENY_PREFIXES)}


def digest_file(path: str | os.PathLike) -> tuple[str, int]:
    """(blake3 hex, size); cached by path, size and mtime."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _cache_lock:
        hit = _digest_cache.get(key)
    if hit is None:
        hit = hash_file(path)
        with _cache_lock:
            if len(_digest_cache) > 100_000:
                _digest_cache.clear()
            _digest_cache[key] = hit
    return hit, st.st_size


def packages() -> dict[str, str]:
    """Installed distributions of this interpreter (name -> version), read once."""
    global _packages_cache
    if _packages_cache is None:
        from importlib import metadata

        found: dict[str, str] = {}
        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").strip()
            if name and name not in found:
                found[name] = dist.version or ""
        _packages_cache = dict(sorted(found.items()))
    return dict(_packages_cache)


def mapped_libraries(pid: int | str = "self") -> list[str]:
    """Distinct shared-object files mapped into the process, from /proc/<pid>/maps."""
    libs: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps", "r", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(maxsplit=5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    name = os.path.basename(path)
                    if path.startswith("/") and (name.endswith(".so") or ".so." in name) and not path.endswith("(deleted)"):
                        libs.add(path)
    except OSError:
        return []
    return sorted(libs)


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else None


def _git_bytes(root: Path, *args: str) -> bytes | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def find_source_root(start: str | os.PathLike) -> Path | None:
    top = _git(Path(start), "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top and top.strip() else None


def git_state(root: Path | None) -> dict | None:
    """Commit, tree, dirty flag and a digest of the uncommitted diff (null when clean)."""
    if root is None:
        return None
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return {"root": str(root), "commit": None, "tree": None, "dirty": None, "diff_digest": None,
                "note": "git could not read HEAD (no commits, or git absent)"}
    tree = _git(root, "rev-parse", "HEAD^{tree}")
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    diff = _git_bytes(root, "diff", "HEAD", "--binary")
    dirty = bool(status.strip()) if status is not None else None
    return {
        "root": str(root),
        "commit": commit.strip(),
        "tree": tree.strip() if tree else None,
        "dirty": dirty,
        "diff_digest": blake3.blake3(diff).hexdigest() if dirty and diff is not None else None,
    }


def _artifact(role: str, path: str, root: Path | None, errors: list[str]) -> dict | None:
    try:
        digest, size = digest_file(path)
    except OSError as exc:
        errors.append(f"{role} {path}: {exc.strerror or exc}")
        return None
    rel = None
    if root is not None:
        try:
            rel = str(Path(path).resolve().relative_to(root.resolve()))
        except ValueError:
            rel = None
    return {"role": role, "path": str(Path(path).resolve()), "relpath": rel if role == "source" else None,
            "digest": digest, "size": size}


def collect(*, argv: list[str], cwd: str, executable: str, pid: int | str = "self",
            sources: list[str] = (), inputs: list[str] = (), in_process: bool = True,
            hash_libraries: bool = True) -> tuple[dict, list[dict], list[str]]:
    """(provenance, artifacts, errors). `in_process`: the recorder's own interpreter, so
    Python version and packages are known; a sidecar's child is any program."""
    errors: list[str] = []
    script = None
    if in_process and argv and argv[0] and os.path.isfile(argv[0]) and argv[0].endswith(".py"):
        script = os.path.abspath(argv[0])
    root = find_source_root(Path(script).parent if script else cwd)
    prov = {
        "argv": list(argv),
        "cwd": cwd,
        "executable": executable,
        "hostname": socket.gethostname(),
        "pid": os.getpid() if pid == "self" else int(pid),
        "platform": platform.platform(),
        "source": git_state(root),
    }
    # The node's environment fingerprint: what preflight later requires to be unchanged.
    try:
        prov["environment"] = fingerprint()
    except OSError as exc:
        errors.append(f"environment fingerprint: {exc}")
    if in_process:
        prov["python_version"] = sys.version.split()[0]
        try:
            prov["packages"] = packages()
        except Exception as exc:  # a broken dist-info must not fail the snapshot
            errors.append(f"packages: {type(exc).__name__}: {exc}")
            prov["packages"] = {}
    artifacts: list[dict] = []
    seen: set[tuple[str, str]] = set()

    def add(role: str, path: str) -> None:
        key = (role, os.path.abspath(path))
        if key in seen:
            return
        seen.add(key)
        a = _artifact(role, path, root, errors)
        if a is not None:
            artifacts.append(a)

    if executable:
        add("binary", executable)
    libs = mapped_libraries(pid)
    prov["libraries"] = len(libs)
    if hash_libraries:
        for lib in libs:
            add("library", lib)
    if script:
        add("source", script)
    for s in sources:
        add("source", s)
    for i in inputs:
        add("input", i)
    return prov, artifacts, errors
