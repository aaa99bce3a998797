"""Where stallcase may read and write, and what kind of file it opens.

Reading: only regular files. A FIFO, device, socket or directory is refused *before*
anything blocks on it: the file is opened with O_NONBLOCK (so opening a FIFO returns at
once), fstat'ed, and refused unless it is a regular file, then switched back to blocking.
Paths an incident names are read only inside the incident directory or inside a root the
user declared (`allow_roots` in the config, `--allow-root` on the command line,
$STALLCASE_ALLOW_ROOTS; the working directory counts as declared). Writing: an output never replaces a FIFO, a
symlink or anything else that is not a regular file, and results and incidents are
created only inside the working directory or a declared root. docs/security.md.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterable

from .errors import InputError, StallcaseError

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symlink"}


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular(path: str | os.PathLike, where=None, *, max_bytes: int | None = None,
                 follow: bool = True, os_errors: bool = False) -> BinaryIO:
    """Open `path` for reading only if it is a regular file (checked on the open descriptor).

    follow=False refuses a symlink as the last component (O_NOFOLLOW). max_bytes refuses a
    larger file (a sparse 1 TB file is refused by its size, never read). os_errors=True
    lets a failed open raise its OSError as is (for callers that handle those)."""
    where = path if where is None else where
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os_errors:
            raise
        raise _open_failed(exc, where, path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(where, f"is {kind_of(st.st_mode)}; only regular files are read")
        if max_bytes is not None and st.st_size > max_bytes:
            raise InputError(where, f"is {st.st_size} bytes, over the {max_bytes}-byte limit for one input")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_failed(exc: OSError, where, path) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(where, "file not found")
    if isinstance(exc, IsADirectoryError):
        return InputError(where, "is a directory, expected a regular file")
    if isinstance(exc, PermissionError):
        return InputError(where, "permission denied")
    if exc.errno == errno.ENXIO:  # a socket (or a device without a driver): say which
        try:
            return InputError(where, f"is {kind_of(os.stat(path).st_mode)}; only regular files are read")
        except OSError:
            pass
    if exc.errno == errno.ELOOP:  # a symlink under O_NOFOLLOW, or a loop
        return InputError(where, "is a symlink (or a symlink loop); only regular files are read")
    return InputError(where, f"cannot open: {exc.strerror or exc}")


def read_regular(path: str | os.PathLike, where=None, *, max_bytes: int | None = None) -> bytes:
    """All bytes of a regular file of at most max_bytes (checked before reading)."""
    with open_regular(path, where, max_bytes=max_bytes) as fh:
        data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:  # grew while we read it
        raise InputError(where or path, f"is over the {max_bytes}-byte limit for one input")
    return data


def check_regular(path: str | os.PathLike, where=None) -> os.stat_result:
    """lstat `path` without opening it: a regular file (not a link to one), else refused."""
    where = path if where is None else where
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise InputError(where, "file not found") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(where, f"is {kind_of(st.st_mode)}; only regular files are read")
    return st


ROOTS_ENV = "STALLCASE_ALLOW_ROOTS"


def declared_roots(extra: Iterable[str | os.PathLike] = (), cwd: str | os.PathLike | None = None) -> list[Path]:
    """The working directory, the roots in $STALLCASE_ALLOW_ROOTS (os.pathsep-separated: the
    user's environment, not the incident's) and `extra` (config allow_roots, --allow-root)."""
    roots = [Path(cwd or os.getcwd()).resolve()]
    env = [r for r in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if r]
    for r in [*env, *(extra or ())]:
        roots.append(Path(r).resolve())
    return roots


def inside(path: str | os.PathLike, roots: Iterable[Path]) -> bool:
    try:
        real = Path(path).resolve()
    except (OSError, RuntimeError):
        return False
    return any(real == r or r in real.parents for r in roots)


def check_readable_from(path: str | os.PathLike, incident_root: Path, roots: Iterable[Path], where) -> Path:
    """A path an incident names: it must resolve inside the incident or a declared root."""
    allowed = [Path(incident_root).resolve(), *roots]
    if not inside(path, allowed):
        raise InputError(where, f"names {path}, outside the incident directory and every declared root "
                                "(declare its directory with allow_roots / --allow-root to read it)")
    return Path(path)


def check_output_file(dest: str | os.PathLike, where=None) -> Path:
    """An output may replace a regular file, never a FIFO, a symlink or a device."""
    dest = Path(dest)
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return dest
    except NotADirectoryError:
        raise StallcaseError(where or dest, "a parent of the output path is not a directory") from None
    if not stat.S_ISREG(st.st_mode):
        raise StallcaseError(where or dest, f"output path is {kind_of(st.st_mode)}; refusing to replace it (remove it or choose another path)")
    return dest


def check_output_dir(path: str | os.PathLike, roots: Iterable[Path], flag: str) -> Path:
    """Results and incidents are created only inside the working directory or a declared root."""
    if not inside(path, roots):
        shown = ", ".join(str(r) for r in roots)
        raise StallcaseError(flag, f"{path} is outside the working directory and every declared root ({shown}); "
                                   "declare it with allow_roots / --allow-root to write there")
    return Path(path)
