"""Process provenance, gathered at snapshot time on the writer thread (never the hot path).

What is recorded: argv, cwd, executable, Python version and installed packages
(importlib.metadata), the distributions the program imported (with their versions, so
preflight can block on a change), shared libraries mapped in the process
(/proc/<pid>/maps), the git commit, tree, dirty state and diff digest of the source root,
and declared inputs and sources.

The program's whole source is pinned, not only its main script: every module imported
from the source root (sys.modules, in the recorder's own process) plus every git-tracked
file under it (`git ls-files`, run in the user's own repository at capture time). The
source root is the git work tree holding the main script (or the cwd), else the script's
directory, unless STALLCASE_SOURCE_ROOT names one (a project inside a monorepo). Installed code (site-packages, the interpreter's prefix) is never "source",
even when a virtualenv lives inside the work tree. Past SOURCE_CAP_BYTES (or
SOURCE_CAP_FILES) the tracked files are dropped, the imported modules are still pinned,
and one line says so. Artifacts (binary, libraries, sources, inputs) carry blake3 digests; digests are
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

import email
import os
import platform
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import blake3

from ..core.cas import hash_file
from ..core.environment import fingerprint

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
# What one snapshot may pin as source. A training repository is small; a tree past this
# holds data or checkpoints under version control, which are inputs, not source.
SOURCE_CAP_BYTES = 64 << 20
SOURCE_CAP_FILES = 20_000
SOURCE_CAP_ENV = "STALLCASE_SOURCE_CAP_MB"  # overrides SOURCE_CAP_BYTES (MiB)
SOURCE_ROOT_ENV = "STALLCASE_SOURCE_ROOT"  # declares the source root (a directory of the work tree)
# Capture runs git only in the user's own work tree; still no hooks, fsmonitor or pager.
_GIT_SAFE = ("-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never")

_digest_cache: dict[tuple[str, int, int], str] = {}
_cache_lock = threading.Lock()
_packages_cache: dict[str, str] | None = None
_top_level_cache: dict[str, list[str]] | None = None
_dists_cache: list[tuple[object, str | None, str | None]] | None = None
_HEADERS_END = re.compile(r"\r?\n\r?\n")  # METADATA's headers end at the first empty line (RFC 822)


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


def _distributions() -> list[tuple[object, str | None, str | None]]:
    """(distribution, Name, Version) of each installed distribution, read once. Only METADATA's
    header block is parsed: importlib's `dist.metadata` parses the whole file, long description
    included, and `packages_distributions` and `dist.version` parse it again (packages() and
    imported_distributions() took 0.20 s of CPU in each recording process, 0.13 s now, for ~130
    distributions; tests/test_capture_provenance.py checks both against importlib's own)."""
    global _dists_cache
    if _dists_cache is None:
        from importlib import metadata

        found = []
        for dist in metadata.distributions():
            text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("") or ""
            head = email.message_from_string(_HEADERS_END.split(text, 1)[0])  # as importlib reads it
            found.append((dist, head["Name"], head["Version"]))
        _dists_cache = found
    return _dists_cache


def packages() -> dict[str, str]:
    """Installed distributions of this interpreter (name -> version), read once."""
    global _packages_cache
    if _packages_cache is None:
        found: dict[str, str] = {}
        for _, raw_name, version in _distributions():
            name = (raw_name or "").strip()
            if name and name not in found:
                found[name] = version or ""
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
        out = subprocess.run(["git", *_GIT_SAFE, "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else None


def _git_bytes(root: Path, *args: str) -> bytes | None:
    try:
        out = subprocess.run(["git", *_GIT_SAFE, "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def find_source_root(start: str | os.PathLike) -> Path | None:
    top = _git(Path(start), "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top and top.strip() else None


def main_script(argv: list[str], cwd: str, in_process: bool) -> str | None:
    """The program's main .py file: argv[0] in the recorder's own process (sys.argv), else the
    first argument ending in .py after the interpreter (`python3 -u train.py ...`)."""
    candidates = argv[:1] if in_process else [a for a in argv[1:] if not a.startswith("-")][:1]
    if not in_process and "-m" in argv[1:-1]:  # python -m pkg.train: the module under the cwd
        mod = argv[argv.index("-m", 1) + 1].replace(".", os.sep)
        candidates = [mod + ".py", os.path.join(mod, "__main__.py")]
    for a in candidates:
        if a and a.endswith(".py"):
            path = a if os.path.isabs(a) else os.path.join(cwd, a)
            real = os.path.realpath(path)
            # An installed entry point (`python -m pytest`, a console script) is not the program's source.
            if os.path.isfile(path) and not any(_under(real, d) for d in _installed_dirs()) and \
                    "site-packages" not in Path(real).parts:
                return os.path.abspath(path)
    return None


def _installed_dirs() -> list[str]:
    """Directories holding installed code: never the program's own source."""
    import sysconfig

    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    return sorted(os.path.realpath(d) + os.sep for d in dirs if d)


def _under(path: str, root: str) -> bool:
    return path.startswith(root.rstrip(os.sep) + os.sep)


def imported_modules(root: Path) -> list[str]:
    """Files of the modules this process imported from under `root` (never installed code)."""
    real_root = os.path.realpath(root)
    installed = _installed_dirs()
    out = set()
    for mod in list(sys.modules.values()):  # a copy: the program may import while we read
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or not os.path.isfile(f):
            continue
        real = os.path.realpath(f)
        parts = Path(real).parts
        if (_under(real, real_root) and not any(_under(real, d) for d in installed)
                and "site-packages" not in parts and "dist-packages" not in parts):
            out.add(real)
    return sorted(out)


def tracked_files(root: Path) -> list[str] | None:
    """Absolute paths of the git-tracked files under `root` (None when it is not a work tree)."""
    out = _git_bytes(root, "ls-files", "-z", "--cached")  # relative to root, only files under it
    if out is None:
        return None
    return [os.path.join(str(root), n.decode("utf-8", "surrogateescape")) for n in out.split(b"\0") if n]


def source_cap_bytes() -> int:
    raw = os.environ.get(SOURCE_CAP_ENV)
    try:
        return int(float(raw) * (1 << 20)) if raw else SOURCE_CAP_BYTES
    except ValueError:
        return SOURCE_CAP_BYTES


def source_files(root: Path, script: str | None, in_process: bool, errors: list[str],
                 realpath: RealPaths | None = None) -> tuple[list[str], dict]:
    """(files to pin as source, summary): imported modules first, then tracked files, capped."""
    realpath = realpath or RealPaths()
    real_root = os.path.realpath(root)
    imported = imported_modules(root) if in_process else []
    tracked = tracked_files(root)
    always = sorted(set(imported) | ({os.path.realpath(script)} if script else set()))
    skipped: list[str] = []
    extra = []
    for f in tracked or []:
        try:
            st = os.lstat(f)
        except OSError:  # deleted in the work tree
            continue
        if not stat.S_ISREG(st.st_mode):  # a link, a submodule, a special file
            if not os.path.isdir(f):
                skipped.append(os.path.relpath(f, root))
            continue
        real = realpath(f, st)
        if _under(real, real_root) and real not in always:
            try:
                real.encode("utf-8")
            except UnicodeEncodeError:  # a record holds UTF-8 text only
                skipped.append(os.path.relpath(f, root).encode("utf-8", "backslashreplace").decode())
                continue
            extra.append(real)
    cap = source_cap_bytes()
    total = 0
    for f in always + extra:
        try:
            total += os.stat(f).st_size
        except OSError:
            pass
    capped = total > cap or len(always) + len(extra) > SOURCE_CAP_FILES
    if capped:
        errors.append(f"source root {root}: its {len(always) + len(extra)} files hold {total / (1 << 20):.1f} MiB, "
                      f"over the cap of {cap / (1 << 20):.0f} MiB or {SOURCE_CAP_FILES} files ({SOURCE_CAP_ENV}); "
                      f"pinned only the {len(always)} imported modules and the main script")
        extra = []
    if skipped:
        errors.append(f"source root {root}: {len(skipped)} tracked symlinks, special files or non-UTF-8 names not pinned "
                      f"(first: {skipped[0]})")
    summary = {"imported_modules": len(imported), "tracked_files": None if tracked is None else len(tracked),
               "pinned_files": len(always) + len(extra), "pinned_bytes": total if not capped else
               sum(os.stat(f).st_size for f in always if os.path.exists(f)), "capped": capped,
               "cap_bytes": cap}
    return always + extra, summary


def imported_distributions() -> dict[str, str]:
    """Installed distributions of the top-level modules this process imported (name -> version)."""
    global _top_level_cache
    from importlib import metadata

    if _top_level_cache is None:
        declared, inferred = getattr(metadata, "_top_level_declared", None), getattr(metadata, "_top_level_inferred", None)
        if declared is None or inferred is None:  # importlib's own helpers moved: its whole (slower) mapping
            _top_level_cache = {k: list(v) for k, v in metadata.packages_distributions().items()}
        else:  # metadata.packages_distributions(), with each Name read once (_distributions)
            tops: dict[str, list[str]] = {}
            for dist, name, _ in _distributions():
                for pkg in declared(dist) or inferred(dist):
                    tops.setdefault(pkg, []).append(name)
            _top_level_cache = tops
    versions = packages()
    tops = {name.partition(".")[0] for name in list(sys.modules)}
    out = {}
    for top in tops:
        for dist in _top_level_cache.get(top, []):
            if dist in versions:
                out[dist] = versions[dist]
    return dict(sorted(out.items()))


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


class RealPaths:
    """`os.path.realpath` for many files in few directories: each directory is resolved once and a
    file that is not itself a link joins its directory's real path (a snapshot pins thousands of
    files of one tree, and resolving each component of each path was most of its time)."""

    def __init__(self) -> None:
        self._dirs: dict[str, str] = {}

    def __call__(self, path: str, st: os.stat_result | None = None) -> str:
        path = os.path.abspath(path)
        try:
            st = st or os.lstat(path)
        except OSError:
            return os.path.realpath(path)
        if stat.S_ISLNK(st.st_mode):
            return os.path.realpath(path)
        head, name = os.path.split(path)
        real_head = self._dirs.get(head)
        if real_head is None:
            real_head = self._dirs[head] = os.path.realpath(head)
        return os.path.join(real_head, name)


def _artifact(role: str, path: str, real_root: str | None, errors: list[str], realpath: RealPaths) -> dict | None:
    try:
        digest, size = digest_file(path)
    except OSError as exc:
        errors.append(f"{role} {path}: {exc.strerror or exc}")
        return None
    real = realpath(path)
    rel = os.path.relpath(real, real_root) if real_root is not None and _under(real, real_root) else None
    return {"role": role, "path": real, "relpath": rel if role == "source" else None,
            "digest": digest, "size": size}


def collect(*, argv: list[str], cwd: str, executable: str, pid: int | str = "self",
            sources: list[str] = (), inputs: list[str] = (), in_process: bool = True,
            hash_libraries: bool = True) -> tuple[dict, list[dict], list[str]]:
    """(provenance, artifacts, errors). `in_process`: the recorder's own interpreter, so
    Python version, packages and imported modules are known; a sidecar's child is any program."""
    errors: list[str] = []
    script = main_script(list(argv), cwd, in_process)
    declared = os.environ.get(SOURCE_ROOT_ENV)
    if declared and os.path.isdir(declared):  # e.g. one project of a monorepo
        root = Path(os.path.abspath(declared))
        git_root = root if find_source_root(root) is not None else None
    else:
        git_root = find_source_root(Path(script).parent if script else cwd)
        root = git_root or (Path(script).parent if script else None)
    source = git_state(git_root) if git_root is not None else (
        {"root": str(root), "commit": None, "tree": None, "dirty": None, "diff_digest": None,
         "note": "not a git work tree: the main script's directory is the source root"} if root is not None else None)
    if source is not None and git_root is not None:
        prefix = _git(git_root, "rev-parse", "--show-prefix")  # the root's place in its repository
        source["prefix"] = prefix.strip() if prefix else ""
    # Pin a tree only for a program: a main script, or (around any command) the cwd's work tree.
    # A recorder inside a test runner or a notebook has no program tree to rebuild.
    exe_path = argv[0] if argv and os.path.isabs(argv[0]) else os.path.join(cwd, argv[0]) if argv and os.sep in argv[0] else None
    pin_tree = root is not None and (script is not None or (
        not in_process and exe_path is not None and _under(os.path.realpath(exe_path), os.path.realpath(root))))
    prov = {
        "argv": list(argv),
        "cwd": cwd,
        "executable": executable,
        "hostname": socket.gethostname(),
        "pid": os.getpid() if pid == "self" else int(pid),
        "platform": platform.platform(),
        "source": source,
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
            prov["imported_distributions"] = imported_distributions()
        except Exception as exc:  # a broken dist-info must not fail the snapshot
            errors.append(f"packages: {type(exc).__name__}: {exc}")
            prov["packages"] = {}
    artifacts: list[dict] = []
    seen: set[tuple[str, str]] = set()
    realpath = RealPaths()
    real_root = os.path.realpath(root) if root is not None else None

    def add(role: str, path: str) -> None:
        key = (role, os.path.abspath(path))
        if key in seen:
            return
        seen.add(key)
        a = _artifact(role, path, real_root, errors, realpath)
        if a is not None:
            artifacts.append(a)

    if executable:
        add("binary", executable)
    libs = mapped_libraries(pid)
    prov["libraries"] = len(libs)
    if hash_libraries:
        for lib in libs:
            add("library", lib)
    if pin_tree:
        files, summary = source_files(root, script, in_process, errors, realpath)
        if source is not None:
            source["pinned"] = summary
        for f in files:
            add("source", f)
    elif script:
        add("source", script)
    for s in sources:
        add("source", s)
    for i in inputs:
        add("input", i)
    return prov, artifacts, errors
