"""Candidate mechanics: how a candidate's argv and source tree are made from the baseline's.

Arguments (`set_args`, `remove_args`, `append_args`) edit the recorded argv list; a
`patch` is applied with `git apply` in a fresh temporary directory that is no git work
tree; a `git_ref` is read from a repository the *user* names (config `candidate.repo` or
top-level `source_repo`), never from the incident's recorded source root, which is
untrusted data (docs/security.md). Git runs there with hooks, fsmonitor and protocols
off and only plumbing that applies no filter (`rev-parse`, `ls-tree`, `cat-file --batch`):
no checkout, so no smudge or textconv filter of that repository can run.

Every candidate tree is checked before anything is stored: regular files only (a
symlink would pin its target's bytes, any file readable here), relative paths that stay
inside the tree, UTF-8 names, and a size cap. A patch that changes no file is refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..core.cas import CAS, hash_bytes
from ..core.errors import StallcaseError

# Same cap as the pinned source tree (capture/provenance.py): a candidate is source, not data.
TREE_CAP_BYTES = 64 << 20
TREE_CAP_FILES = 20_000
PATCH_CAP_BYTES = 16 << 20
GIT_TIMEOUT_S = 60.0
GIT_SAFE = ("-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never",
            "-c", "core.pager=cat", "-c", "core.untrackedCache=false")
_SYMLINK_MODE = re.compile(r"^(new file mode|new mode|old mode|deleted file mode|index [0-9a-f]+\.\.[0-9a-f]+) *120000\b",
                           re.MULTILINE)
_NUMBER = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


# ---- arguments ------------------------------------------------------------------------

def _is_value(token: str) -> bool:
    """The token after a flag is its value unless it is itself a flag (negative numbers are values)."""
    return not token.startswith("-") or token == "-" or bool(_NUMBER.match(token))


def _options_end(argv: list[str]) -> int:
    """Options live before a lone `--`; what follows is positional and never edited."""
    return argv.index("--") if "--" in argv else len(argv)


def _remove(argv: list[str], flag: str, *, with_value: bool) -> list[str]:
    out, i, end = [], 0, _options_end(argv)
    while i < len(argv):
        a = argv[i]
        if i < end and a == flag:
            i += 2 if with_value and i + 1 < end and _is_value(argv[i + 1]) else 1
            continue
        if i < end and a.startswith(flag + "="):
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def _set(argv: list[str], flag: str, value) -> list[str]:
    """`--k v`, `--k=v` and bare `--k`. True: the bare flag present; False: bare flag removed;
    None: flag and its value removed; anything else: the flag's value."""
    if value is None:
        return _remove(argv, flag, with_value=True)
    if value is False:
        return _remove(argv, flag, with_value=False)
    out, end, found = list(argv), _options_end(argv), False
    i = 0
    while i < end:
        a = out[i]
        if a == flag:
            found = True
            has_value = i + 1 < end and _is_value(out[i + 1])
            if value is True:
                i += 1  # present as `--k` (or `--k v`): left as it is
            elif has_value:
                out[i + 1] = str(value)
                i += 2
            else:  # a bare flag followed by another flag or nothing: attach the value, take no neighbour
                out[i] = f"{flag}={value}"
                i += 1
            continue
        if a.startswith(flag + "="):
            found = True
            out[i] = flag if value is True else f"{flag}={value}"
        i += 1
    if not found:
        out[end:end] = [flag] if value is True else [flag, str(value)]
    return out


def apply_arg_changes(argv: list[str], changes: dict) -> list[str]:
    """The candidate's argv: remove_args, then set_args, then append_args."""
    out = list(argv)
    for flag in changes.get("remove_args", []):
        out = _remove(out, str(flag), with_value=True)
    for flag, value in changes.get("set_args", {}).items():
        if not str(flag).startswith("-"):
            raise StallcaseError(f"candidate.set_args.{flag}", "not a flag: set_args edits options ('--name' or '-n'), never positional arguments")
        out = _set(out, str(flag), value)
    out += [str(a) for a in changes.get("append_args", [])]
    return out


# ---- trees ----------------------------------------------------------------------------

def check_relpath(rel: str, where: str) -> str:
    p = Path(rel)
    if not rel or p.is_absolute() or ".." in p.parts or "\0" in rel or p.parts[:1] == (".git",):
        raise StallcaseError(where, f"path {rel!r} leaves the source tree")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise StallcaseError(where, f"path {rel.encode('utf-8', 'backslashreplace').decode()!r} is not UTF-8") from None
    return p.as_posix()


def _check_size(files: dict[str, bytes], where: str) -> None:
    total = sum(len(b) for b in files.values())
    if total > TREE_CAP_BYTES or len(files) > TREE_CAP_FILES:
        raise StallcaseError(where, f"candidate tree holds {len(files)} files, {total / (1 << 20):.1f} MiB: over the cap "
                             f"of {TREE_CAP_BYTES >> 20} MiB or {TREE_CAP_FILES} files")


def read_tree(root: Path, where: str) -> dict[str, bytes]:
    """Every file under `root` (relpath -> bytes); refuses symlinks and special files, never following one."""
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                raise StallcaseError(where, f"the candidate tree holds a symlink {rel!r}: refused (its target could be any file on this machine)")
            if name in dirnames:
                continue
            if not p.is_file():
                raise StallcaseError(where, f"the candidate tree holds {rel!r}, which is not a regular file")
            files[check_relpath(rel, where)] = p.read_bytes()
    _check_size(files, where)
    return files


def write_tree(files: dict[str, bytes], root: Path) -> None:
    for rel, data in files.items():
        target = root / check_relpath(rel, "candidate tree")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _git_env(home: str) -> dict[str, str]:
    """A bare environment for git: no user or system config beyond the repository's own."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_ATTR_NOSYSTEM": "1"}


def apply_patch(base: dict[str, bytes], patch_path: str) -> tuple[dict[str, bytes], bytes]:
    """(the baseline tree with `patch_path` applied, the patch's bytes as applied); refuses a
    patch that changes nothing, creates a symlink, or leaves the tree."""
    where = patch_path
    p = Path(patch_path)
    if not p.is_file():
        raise StallcaseError(where, "candidate patch file not found (or not a regular file)")
    if p.stat().st_size > PATCH_CAP_BYTES:
        raise StallcaseError(where, f"candidate patch is over {PATCH_CAP_BYTES >> 20} MiB")
    patch_bytes = p.read_bytes()  # read once: what is applied is what is pinned
    text = patch_bytes.decode("utf-8", "replace")
    if _SYMLINK_MODE.search(text):
        raise StallcaseError(where, "the patch creates or changes a symlink (mode 120000): refused")
    with tempfile.TemporaryDirectory(prefix="stallcase-patch-") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        write_tree(base, tree)
        applied = Path(tmp) / "candidate.patch"
        applied.write_bytes(patch_bytes)
        # GIT_CEILING_DIRECTORIES: even when TMPDIR is inside a work tree, git apply here is a
        # plain patch(1), never the repository's "apply relative to the top, skip the rest".
        env = dict(_git_env(tmp), GIT_CEILING_DIRECTORIES=tmp)
        res = subprocess.run(["git", *GIT_SAFE, "apply", "--verbose", "--whitespace=nowarn", str(applied)],
                             cwd=tree, env=env, capture_output=True, text=True, check=False, timeout=GIT_TIMEOUT_S)
        if res.returncode != 0:
            raise StallcaseError(where, f"patch does not apply to the incident's sources: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else 'git apply failed'}")
        leftovers = sorted(set(os.listdir(tmp)) - {"tree", "candidate.patch"})
        if leftovers:
            raise StallcaseError(where, f"the patch wrote outside the source tree ({leftovers[0]}): refused")
        out = read_tree(tree, where)
    if out == base:
        raise StallcaseError(where, "the patch applies but changes no file of the incident's sources: refused")
    return out, patch_bytes


# ---- git refs -------------------------------------------------------------------------

def _git(repo: str, args: list[str], where: str, *, stdin: bytes | None = None, home: str) -> bytes:
    try:
        res = subprocess.run(["git", *GIT_SAFE, "-C", repo, *args], input=stdin, capture_output=True,
                             env=_git_env(home), timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StallcaseError(where, f"git {args[0]} could not run: {exc}") from None
    if res.returncode != 0:
        raise StallcaseError(where, f"git {args[0]} failed in {repo}: {res.stderr.decode('utf-8', 'replace').strip()[:300]}")
    return res.stdout


def read_git_ref(repo: str, ref: str, prefix: str = "") -> tuple[str, dict[str, bytes], list[str]]:
    """(commit, relpath -> bytes, skipped submodules) of `ref` in the user's repository `repo`;
    with `prefix` (the pinned root's directory inside the repository) only that subtree,
    relative to it."""
    where = "candidate.git_ref"
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n"):
        raise StallcaseError(where, f"not a git ref: {ref!r}")
    if not os.path.isdir(repo):
        raise StallcaseError("candidate.repo", f"{repo}: not a directory")
    with tempfile.TemporaryDirectory(prefix="stallcase-git-") as home:
        commit = _git(repo, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
                      where, home=home).decode().strip()
        prefix = check_relpath(prefix.rstrip("/"), "provenance.source.prefix") if prefix.strip("/") else ""
        treeish = f"{commit}:{prefix}" if prefix else commit
        listing = _git(repo, ["ls-tree", "-r", "-z", "-l", treeish], where, home=home)
        blobs: list[tuple[str, str, int]] = []
        skipped: list[str] = []
        total = 0
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, name_b = entry.partition(b"\t")
            mode, kind, sha, size = meta.decode().split()
            try:
                name = name_b.decode("utf-8")
            except UnicodeDecodeError:
                raise StallcaseError(where, f"{ref}: a path is not UTF-8: {name_b!r}") from None
            if mode == "120000":
                raise StallcaseError(where, f"{ref}: {name!r} is a symlink: refused (its target could be any file on this machine)")
            if kind == "commit":  # a submodule: its files are another repository's
                skipped.append(name)
                continue
            if kind != "blob":
                continue
            blobs.append((check_relpath(name, where), sha, int(size)))
            total += int(size)
            if total > TREE_CAP_BYTES or len(blobs) > TREE_CAP_FILES:
                raise StallcaseError(where, f"{ref}: its tree is over the cap of {TREE_CAP_BYTES >> 20} MiB or {TREE_CAP_FILES} files")
        data = _git(repo, ["cat-file", "--batch"], where, stdin=b"".join(s.encode() + b"\n" for _, s, _ in blobs), home=home)
    files: dict[str, bytes] = {}
    pos = 0
    for rel, sha, size in blobs:
        nl = data.index(b"\n", pos)
        header = data[pos:nl].split()
        if len(header) != 3 or header[0].decode() != sha or header[1] != b"blob" or int(header[2]) != size:
            raise StallcaseError(where, f"{ref}: git cat-file answered {data[pos:nl][:80]!r} for {rel}")
        files[rel] = data[nl + 1: nl + 1 + size]
        pos = nl + 1 + size + 1
    return commit, files, skipped


# ---- storing ----------------------------------------------------------------------------

def tree_sources(files: dict[str, bytes]) -> list[dict]:
    return sorted(({"relpath": rel, "digest": hash_bytes(b)} for rel, b in files.items()), key=lambda s: s["relpath"])


def store_blobs(blobs: list[bytes], cas: CAS) -> None:
    """Store a checked tree's files (only after every check of the plan passed: nothing half-stored)."""
    for data in blobs:
        cas.put_bytes(data)
