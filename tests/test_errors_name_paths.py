"""Every error names the path it concerns, also when the OS does not (issue 38).

`ENOSPC`/`EIO` from write() or fsync() carry no file name (`exc.filename` is None), so the
rule log used to fall back to the function's name (`workflow_lib.trials.block.run_block_rule:
[Errno 28] No space left on device`). A small tmpfs, filled, gives the real ENOSPC.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from workflow_lib.core import atomic, rulelog
from workflow_lib.core.cas import CAS


@pytest.fixture
def full_fs(tmp_path):
    """A 256 KiB tmpfs at tmp_path/fs, filled to 4 KiB free."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        st = os.statvfs(mnt)
        (mnt / "filler").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - 4096))
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_on_an_atomic_write_names_the_file(full_fs):
    dest = full_fs / "results" / "comparison.json"
    with pytest.raises(OSError) as got:
        atomic.write_bytes(dest, b"x" * (1 << 20))
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(dest)
    assert not dest.exists() and not [p for p in dest.parent.iterdir()]  # nothing half-written


def test_a_full_disk_on_a_store_put_names_the_store(full_fs, tmp_path):
    src = tmp_path / "table.parquet"
    src.write_bytes(os.urandom(1 << 20))
    with pytest.raises(OSError) as got:
        CAS(full_fs).put_file(src)
    assert got.value.errno == errno.ENOSPC and got.value.filename and str(full_fs) in got.value.filename


def test_the_rule_log_names_a_path_never_a_function(tmp_path):
    def write_something(out_path):
        raise OSError(errno.EIO, os.strerror(errno.EIO))  # as fsync() raises it: no file name

    log = tmp_path / "logs" / "trials-b000.log"
    with pytest.raises(OSError):
        rulelog.logged(log, write_something, str(tmp_path / "out" / "b000.json"))
    line = log.read_text().splitlines()[-1]
    assert "write_something" not in line and "test_errors_name_paths" not in line, line
    assert line.startswith(f"error: {tmp_path}") and "Input/output error" in line, line


def test_a_full_disk_on_the_blocks_log_names_the_log(full_fs):
    from workflow_lib.trials.block import _open_log

    log = _open_log(full_fs / "logs" / "trials-b000.log")
    with pytest.raises(OSError) as got:
        log.write("x" * (1 << 20))
        log.close()
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(full_fs / "logs" / "trials-b000.log")


def test_store_objects_are_readable_like_the_records(tmp_path):
    old = os.umask(0o022)
    try:
        src = tmp_path / "workload.py"
        src.write_text("print('hi')\n")
        store = CAS(tmp_path / "results")
        for digest in (store.put_file(src), store.put_bytes(b"{}")):
            assert store.path_for(digest).stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)
