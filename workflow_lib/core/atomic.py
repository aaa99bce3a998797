"""Atomic file writes: temp file in the same directory, fsync, rename.

A reader sees either the old complete file or the new complete file, never a
partial one, even if the writer is killed with SIGKILL mid-write. The temp name
starts with '.tmp-' so verification passes and globbing skip leftovers.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

TMP_PREFIX = ".tmp-"


@contextlib.contextmanager
def naming(path: str | os.PathLike, *unnamed: str | os.PathLike) -> Iterator[None]:
    """An OSError inside names `path`: write() and fsync() report ENOSPC/EIO without a file
    name, and a copy names its source or a temp file; the user needs the file being written
    (`unnamed`: names that are ours, e.g. the temp file, replaced by `path` too)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None and str(exc.filename) not in {str(u) for u in unnamed}:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def _fsync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    """The process umask, read without changing it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temp path beside `dest`; on clean exit fsync it and rename onto `dest`.

    On any exception the temp file is removed and `dest` is untouched.
    With overwrite=False an existing `dest` is kept (first writer wins), which is
    what content-addressed objects want.
    """
    dest = Path(dest)
    # An output replaces a regular file only: renaming over a FIFO or a symlink (-o naming
    # one) would silently swap what a reader or another program expects there.
    from .safe_io import check_output_file
    check_output_file(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + dest.name + ".", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        with naming(dest, tmp_path):
            yield tmp_path
            with open(tmp_path, "rb+") as fh:
                os.fsync(fh.fileno())
            # mkstemp creates 0600; a results tree is shared with colleagues like any file.
            os.chmod(tmp_path, 0o666 & ~_umask())
            if overwrite:
                os.replace(tmp_path, dest)
            else:
                try:
                    # link() fails if dest exists: no window where a reader sees a partial file.
                    os.link(tmp_path, dest)
                except FileExistsError:
                    pass
                finally:
                    tmp_path.unlink(missing_ok=True)
        _fsync_dir(dest.parent)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_bytes(dest: str | os.PathLike, data: bytes, *, overwrite: bool = True) -> Path:
    with atomic_path(dest, overwrite=overwrite) as tmp:
        tmp.write_bytes(data)
    return Path(dest)


def write_text(dest: str | os.PathLike, text: str, *, overwrite: bool = True) -> Path:
    return write_bytes(dest, text.encode("utf-8"), overwrite=overwrite)


def write_with(dest: str | os.PathLike, writer: Callable[[Path], None], *, overwrite: bool = True) -> Path:
    """Atomically produce `dest` with a writer that takes a path (e.g. pyarrow.parquet.write_table)."""
    with atomic_path(dest, overwrite=overwrite) as tmp:
        writer(tmp)
    return Path(dest)
