import multiprocessing as mp
import os

import pytest
from hypothesis import given, settings, strategies as st

from workflow_lib.core.cas import CAS, hash_bytes, hash_file
from workflow_lib.core.errors import DigestMismatch, StallcaseError


def test_round_trip_bytes_and_file(tmp_path):
    cas = CAS(tmp_path)
    d = cas.put(b"hello")
    assert d == hash_bytes(b"hello")
    p = cas.get(d)
    assert p == tmp_path / "cas" / "blake3" / d[:2] / d[2:]
    assert p.read_bytes() == b"hello"
    f = tmp_path / "f.bin"
    f.write_bytes(b"hello")
    assert cas.put(f) == d  # idempotent, same object
    assert cas.verify() == []


def test_large_file_hash_uses_mmap_path_and_matches(tmp_path):
    f = tmp_path / "big"
    data = os.urandom(9 << 20)  # above the mmap threshold
    f.write_bytes(data)
    assert hash_file(f) == hash_bytes(data)
    assert CAS(tmp_path).put(f) == hash_bytes(data)


def test_corruption_detected_on_read(tmp_path):
    cas = CAS(tmp_path)
    d = cas.put(b"precious")
    path = cas.path_for(d)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered")
    assert cas.verify() == [d]
    with pytest.raises(DigestMismatch, match="corrupt"):
        cas.get(d)
    # A corrupt object is never usable: get removes it, so the stage that stored it can put it again.
    assert not path.exists() and cas.verify() == []
    assert cas.put(b"precious") == d and cas.get_bytes(d) == b"precious"


def test_missing_object_and_bad_digest(tmp_path):
    cas = CAS(tmp_path)
    with pytest.raises(StallcaseError, match="not in the store"):
        cas.get("0" * 64)
    with pytest.raises(StallcaseError, match="not a blake3"):
        cas.get("../../etc/passwd")


def _put_many(root, data, n, q):
    cas = CAS(root)
    q.put({cas.put(data) for _ in range(n)})


def test_concurrent_put_of_one_blob_from_two_processes(tmp_path):
    data = os.urandom(3 << 20)
    q = mp.get_context("spawn").Queue()
    procs = [mp.get_context("spawn").Process(target=_put_many, args=(str(tmp_path), data, 20, q)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    digest = hash_bytes(data)
    assert results == [{digest}, {digest}]
    cas = CAS(tmp_path)
    assert cas.get(digest).read_bytes() == data
    assert list(cas.iter_digests()) == [digest]
    leftovers = [p for p in (tmp_path / "cas").rglob("*") if p.is_file() and p.name.startswith(".tmp-")]
    assert leftovers == []


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=4096))
def test_put_get_property(tmp_path_factory, data):
    cas = CAS(tmp_path_factory.mktemp("cas"))
    d = cas.put(data)
    assert cas.get_bytes(d) == data
    assert cas.put(data) == d
