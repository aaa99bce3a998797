"""Content-addressed store: blobs named by their blake3 digest.

Layout: `<root>/cas/blake3/<first 2 hex>/<remaining 62 hex>`. Objects are immutable:
`put` writes through a temp file + fsync + link, so two processes putting the same
blob at once both succeed and leave one complete object; `get` re-hashes the object
before handing out its path, so a corrupted object is never used.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import blake3

from . import atomic, safe_io
from .errors import DigestMismatch, MissingArtifact, StallcaseError

ALGO = "blake3"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20
# Below this size threading and mmap cost more than they save.
_MMAP_MIN_BYTES = 8 << 20


def hash_bytes(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def hash_file(path: str | os.PathLike) -> str:
    """blake3 of a regular file; large files are mmapped and hashed on all cores.

    A FIFO, device, socket or directory is refused before anything is read from it
    (safe_io.open_regular), so hashing a hostile path never blocks or runs forever."""
    path = Path(path)
    with safe_io.open_regular(path, os_errors=True) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < _MMAP_MIN_BYTES:
            hasher = blake3.blake3()
            while chunk := fh.read(_CHUNK):
                hasher.update(chunk)
            return hasher.hexdigest()
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    hasher.update_mmap(path)
    return hasher.hexdigest()


def check_digest(digest: str, where: str = "digest") -> str:
    if not isinstance(digest, str) or not _HEX64.match(digest):
        raise StallcaseError(where, f"not a blake3 hex digest: {digest!r}")
    return digest


class MissingObject(StallcaseError):
    """An object a record names is not in the store."""

    def __init__(self, where, problem: str, digest: str):
        super().__init__(where, problem)
        self.digest = digest


class CorruptObject(DigestMismatch):
    """A store object's content does not hash to its name (it has been removed: see CAS.get)."""

    def __init__(self, where, problem: str, digest: str):
        super().__init__(where, problem)
        self.digest = digest


def mark_stale(record: Path) -> None:
    """Make a record out of date for Snakemake by removing it, so its rule runs again. (An older
    mtime is not enough: Snakemake 9 does not rerun a job whose input's checksum it recorded and
    finds unchanged.) Only derived records come here: the incident they are made from stays."""
    record.unlink(missing_ok=True)


def heal(exc: StallcaseError, paths) -> StallcaseError:
    """A stage failed on a missing or corrupt store object: remove (mark_stale) the record that
    stored it, so a plain rerun stores it again. `paths` are the stage's arguments (its input
    records); the snapshot stored the incident's tables and sources and lives at
    results/<incident>/snapshot.json above every run's records; a plan stores its patches.
    Returns the error to report, saying what was done and what to run."""
    if isinstance(exc, (MissingObject, CorruptObject)):
        digests = [exc.digest]
    elif isinstance(exc, MissingArtifact):
        digests = [d for _, _, d in exc.missing]
    else:
        return exc
    records = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)) or not str(p).endswith(".json"):
            continue
        p = Path(p)
        records += [q / "snapshot.json" for q in p.parents if (q / "snapshot.json").is_file()][:1] + [p]
    for record in records:
        try:
            text = record.read_text(encoding="utf-8")
        except OSError:
            continue
        if any(d in text for d in digests):
            mark_stale(record)
            where = exc.where or record
            return StallcaseError(where, f"{exc.problem.splitlines()[0]}; {record} was out of date and is removed: rerun "
                                         "the same command and its stage makes it again, storing the object again (if "
                                         "the incident itself is gone, record or import it again)")
    return exc


class CAS:
    """A store rooted at `root` (objects live under `root/cas/blake3/`)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.objects = self.root / "cas" / ALGO

    def path_for(self, digest: str) -> Path:
        check_digest(digest)
        return self.objects / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return self.path_for(digest).is_file()

    def check_writable(self, digests) -> None:
        """Refuse, before anything is stored, a store whose directories are in the way: the
        objects directory or a prefix directory that is a file (or a link to one). A put that
        fails halfway through an ingest would otherwise leave objects nothing references."""
        for d in [self.root, self.root / "cas", self.objects, *{self.path_for(x).parent for x in digests}]:
            if os.path.lexists(d) and (os.path.islink(d) or not os.path.isdir(d)):
                what = "a symlink" if os.path.islink(d) else "not a directory"
                raise StallcaseError(d, f"store path is {what}; refusing to store anything (run stallcase verify)")

    def put_bytes(self, data: bytes) -> str:
        digest = hash_bytes(data)
        dest = self.path_for(digest)
        if not dest.exists():
            atomic.write_bytes(dest, data, overwrite=False)
        return digest

    def put_file(self, src: str | os.PathLike) -> str:
        """Copy a file into the store; hashes what was copied, not what was there before."""
        src = Path(src)
        known = hash_file(src)
        if self.has(known):  # already stored: no copy (objects are verified on get)
            return known
        self.objects.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=atomic.TMP_PREFIX, dir=self.objects)
        tmp = Path(tmp_name)
        try:
            os.close(fd)
            # Kernel-side copy (copy_file_range/sendfile), then hash the copy itself with
            # mmap + threads: the digest is of what the store holds, and two fast passes
            # beat one single-threaded read-hash-write pass. A full disk names the store
            # (a failed copy names its source, and an fsync nothing).
            with atomic.naming(self.objects, src, tmp):
                shutil.copyfile(src, tmp)
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
            # mkstemp creates 0600: objects are readable like the records (0644 under umask 022).
            os.chmod(tmp, 0o666 & ~atomic._umask())
            digest = hash_file(tmp)
            dest = self.path_for(digest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                # link() never replaces: a concurrent writer of the same blob wins harmlessly.
                os.link(tmp, dest)
            except FileExistsError:
                pass
            atomic._fsync_dir(dest.parent)
            return digest
        finally:
            tmp.unlink(missing_ok=True)

    def put(self, obj: bytes | str | os.PathLike) -> str:
        """put(bytes) or put(path) -> digest. Idempotent."""
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return self.put_bytes(bytes(obj))
        return self.put_file(obj)

    def get(self, digest: str) -> Path:
        """Path of a verified object. Raises DigestMismatch if the object is corrupt."""
        path = self.path_for(digest)
        if not path.is_file():
            raise MissingObject(path, f"object {digest} is not in the store", digest)
        actual = hash_file(path)
        if actual != digest:
            # Never usable again, and while it stays, put() would take it for the stored object.
            path.unlink(missing_ok=True)
            raise CorruptObject(path, f"store object is corrupt: expected blake3 {digest}, content hashes to {actual} "
                                      "(removed from the store)", digest)
        return path

    def get_bytes(self, digest: str) -> bytes:
        path = self.get(digest)
        data = path.read_bytes()
        # Re-check what we actually read: the file could change between hash and read.
        if hash_bytes(data) != digest:
            raise DigestMismatch(path, f"store object changed while reading: expected blake3 {digest}")
        return data

    def iter_digests(self):
        if not self.objects.is_dir():
            return
        for sub in sorted(self.objects.iterdir()):
            if not sub.is_dir() or len(sub.name) != 2:
                continue
            for obj in sorted(sub.iterdir()):
                if obj.name.startswith(atomic.TMP_PREFIX):
                    continue
                yield sub.name + obj.name

    def verify(self) -> list[str]:
        """Digests of every corrupt object (empty when the store is sound)."""
        bad = []
        for digest in self.iter_digests():
            try:
                if hash_file(self.path_for(digest)) != digest:
                    bad.append(digest)
            except (OSError, StallcaseError):
                bad.append(digest)
        return bad
