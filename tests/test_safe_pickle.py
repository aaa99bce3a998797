"""The restricted unpickler admits plain data and refuses (never executes) anything else."""

from __future__ import annotations

import io
import os
import pickle
import pickletools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workflow_lib.core.errors import InputError
from workflow_lib.core.safe_pickle import RestrictedUnpickler, loads_restricted

PLAIN = {
    "version": "2.10",
    "entries": [{"record_id": 0, "process_group": ("0", "default_pg"), "sizes": [[4, 4]], "duration_ms": 1.5,
                 "retired": True, "frames": None, "blob": b"\x00\x01"}],
    "pg_status": {},
}

_SENTINEL_ENV = "STALLCASE_PWNED_SENTINEL"


class _Evil:
    """__reduce__ asks the unpickler to call os.system / builtins.eval."""

    def __init__(self, func, arg):
        self.func, self.arg = func, arg

    def __reduce__(self):
        return (self.func, (self.arg,))


def _marker(tmp_path):
    return tmp_path / "executed"


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_loads_in_every_protocol(protocol):
    value = PLAIN
    if protocol < 3:
        # Protocols 0-2 spell bytes as a call to _codecs.encode, which is refused below.
        value = {**PLAIN, "entries": [{k: v for k, v in PLAIN["entries"][0].items() if k != "blob"}]}
    assert loads_restricted(pickle.dumps(value, protocol=protocol), "dump.pkl") == value


def test_bytes_in_protocol_2_needs_a_global_and_is_refused():
    with pytest.raises(InputError, match="_codecs.encode"):
        loads_restricted(pickle.dumps(b"x", protocol=2), "b2.pkl")


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_os_system_reduce_is_refused_not_executed(tmp_path, protocol):
    marker = _marker(tmp_path)
    data = pickle.dumps({"entries": [_Evil(os.system, f"touch {marker}")]}, protocol=protocol)
    with pytest.raises(InputError) as err:
        loads_restricted(data, "evil_rank0.pkl")
    assert not marker.exists()
    msg = err.value.oneline()
    assert msg.startswith("evil_rank0.pkl:") and "refused" in msg and "system" in msg and "\n" not in msg


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_builtins_eval_is_refused(protocol):
    data = pickle.dumps(_Evil(eval, f"__import__('os').environ.__setitem__('{_SENTINEL_ENV}', '1')"), protocol=protocol)
    with pytest.raises(InputError, match=r"(builtins|__builtin__)\.eval"):
        loads_restricted(data, "x.pkl")
    assert _SENTINEL_ENV not in os.environ


def _ops(*parts: bytes) -> bytes:
    return b"".join(parts)


# Hand-assembled pickles that reach a callable by each opcode family.
HOSTILE = {
    "GLOBAL+REDUCE (proto 0)": b"cos\nsystem\n(S'true'\ntR.",
    "INST (proto 0)": b"(S'true'\nios\nsystem\n.",
    "OBJ (proto 1)": b"(cos\nsystem\nS'true'\no.",
    "STACK_GLOBAL+REDUCE (proto 4)": _ops(b"\x80\x04", b"\x8c\x02os", b"\x8c\x06system", b"\x93",
                                          b"\x8c\x04true", b"\x85", b"R", b"."),
    "NEWOBJ (proto 2)": _ops(b"\x80\x02", b"cbuiltins\nobject\n", b")", b"\x81", b"."),
    "getattr chain": _ops(b"\x80\x02", b"cbuiltins\ngetattr\n", b"cbuiltins\n__import__\n",
                          b"X\x02\x00\x00\x00os", b"\x85", b"R", b"X\x06\x00\x00\x00system", b"\x86", b"R", b"."),
    "EXT1 (copyreg registry)": _ops(b"\x80\x02", b"\x82\x01", b"."),
    "persistent id": _ops(b"\x80\x02", b"X\x03\x00\x00\x00pid", b"Q", b"."),
    "REDUCE without callable": _ops(b"\x80\x02", b"X\x01\x00\x00\x00a", b")", b"R", b"."),
    "BUILD on a dict": _ops(b"\x80\x02", b"}", b"}", b"X\x01\x00\x00\x00a", b"K\x01", b"s", b"b", b"."),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_opcodes_are_refused(name):
    with pytest.raises(InputError) as err:
        loads_restricted(HOSTILE[name], f"{name}.pkl")
    assert err.value.where == f"{name}.pkl"


def test_hostile_opcode_fixtures_really_use_those_opcodes():
    # Guards the table above: each pickle must contain the opcode it claims to test.
    wanted = {"GLOBAL+REDUCE (proto 0)": "GLOBAL", "INST (proto 0)": "INST", "OBJ (proto 1)": "OBJ",
              "STACK_GLOBAL+REDUCE (proto 4)": "STACK_GLOBAL", "NEWOBJ (proto 2)": "NEWOBJ",
              "EXT1 (copyreg registry)": "EXT1", "persistent id": "BINPERSID"}
    for name, opname in wanted.items():
        names = {op.name for op, _, _ in pickletools.genops(HOSTILE[name])}
        assert opname in names, name


@pytest.mark.parametrize("value, name", [({1, 2}, "set"), (frozenset({1}), "frozenset"), (bytearray(b"x"), "bytearray"),
                                         ({"entries": [{"sizes": {1, 2}}]}, "set"), ([[bytearray(b"x")]], "bytearray")])
def test_set_and_bytearray_are_refused(value, name):
    # No opcode scan any more: these load as plain-looking values and the tree check refuses them, at any depth.
    with pytest.raises(InputError, match=f"holds a {name};"):
        loads_restricted(pickle.dumps(value, protocol=5), "s.pkl")


def test_out_of_band_buffer_is_refused():
    data = pickle.dumps(pickle.PickleBuffer(b"abc"), protocol=5, buffer_callback=lambda b: False)
    assert b"\x97" in data  # NEXT_BUFFER
    with pytest.raises(InputError, match="not a readable pickle"):
        loads_restricted(data, "oob.pkl")


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_unpickler_alone_refuses_globals(tmp_path, protocol):
    # The second guard on its own (no opcode scan): find_class resolves nothing.
    marker = _marker(tmp_path)
    data = pickle.dumps(_Evil(os.system, f"touch {marker}"), protocol=protocol)
    with pytest.raises(Exception, match="only plain containers"):
        RestrictedUnpickler(io.BytesIO(data)).load()
    assert not marker.exists()


@pytest.mark.parametrize("op", [b"\x8e", b"\x8d"])  # BINBYTES8, BINUNICODE8
@pytest.mark.parametrize("declared", [1 << 60, 1 << 34])
def test_huge_declared_length_is_refused_without_filling_it(op, declared):
    # A length past the end of the data: the C unpickler finds the data truncated, or (BINBYTES8 of
    # 2**60) cannot even reserve it; it never reads or fills that much, and the refusal is one line.
    data = b"\x80\x05" + op + declared.to_bytes(8, "little") + b"x."
    with pytest.raises(InputError, match="not a readable pickle|more memory than is available") as err:
        loads_restricted(data, "huge.pkl")
    assert "\n" not in err.value.oneline()


def test_size_limit():
    data = pickle.dumps(list(range(1000)))
    with pytest.raises(InputError, match="over the 100-byte limit"):
        loads_restricted(data, "big.pkl", max_bytes=100)


def test_depth_limit():
    value: list = []
    for _ in range(40):
        value = [value]
    data = pickle.dumps(value)
    assert loads_restricted(data, "ok.pkl", max_depth=64) == value
    with pytest.raises(InputError, match="deeper than 10"):
        loads_restricted(data, "deep.pkl", max_depth=10)


def test_shared_containers_are_counted_expanded():
    # 30 levels of [x, x] is 60 bytes of memo references but 2**30 values to any tree walk.
    x: list = []
    for _ in range(30):
        x = [x, x]
    data = pickle.dumps(x, protocol=2)
    assert len(data) < 2000
    with pytest.raises(InputError, match="expands to more than"):
        loads_restricted(data, "bomb.pkl")


def test_shared_containers_within_limits_load():
    # Memo-shared containers take the exact walk; a modest sharing is fine.
    shared = [1, 2, 3]
    value = {"a": [shared] * 10, "b": (shared, shared)}
    assert loads_restricted(pickle.dumps(value, protocol=4), "ok.pkl") == value


def test_gc_state_is_restored():
    import gc
    loads_restricted(pickle.dumps(PLAIN), "p.pkl")
    assert gc.isenabled()
    with pytest.raises(InputError):
        loads_restricted(b"garbage", "bad.pkl")
    assert gc.isenabled()


def test_cycle_is_refused():
    x: list = []
    x.append(x)
    with pytest.raises(InputError, match="cycle|deeper"):
        loads_restricted(pickle.dumps(x), "cycle.pkl")


@pytest.mark.parametrize("data", [b"", b"\x80\x02", b"garbage", b"\x80\x02h\x05.", b"{\"json\": 1}"])
def test_malformed_is_one_line_input_error(data):
    with pytest.raises(InputError) as err:
        loads_restricted(data, "bad.pkl")
    assert "\n" not in err.value.oneline() and err.value.where == "bad.pkl"

_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8) | st.binary(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
    max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(value=_plain, protocol=st.integers(3, pickle.HIGHEST_PROTOCOL))
def test_plain_values_round_trip(value, protocol):
    assert loads_restricted(pickle.dumps(value, protocol=protocol), "p.pkl") == value


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=1, max_size=64))
def test_arbitrary_bytes_load_or_raise_input_error(data):
    # Never another exception type, never a non-plain value.
    try:
        loads_restricted(b"\x80\x04" + data, "fuzz.pkl")
    except InputError:
        pass


_shared_tree = st.recursive(
    st.none() | st.integers() | st.text(max_size=6) | st.binary(max_size=6) | st.sampled_from([set(), bytearray(b"z")]),
    lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(value=_shared_tree, share=st.booleans(), limits=st.tuples(st.integers(1, 8), st.integers(1, 80), st.integers(0, 40)))
def test_level_walk_agrees_with_the_exact_walk(value, share, limits):
    # The fast walk either defers (False) or reaches the exact walk's verdict. (Which limit trips first
    # may differ: one walks level by level, the other depth first.)
    from workflow_lib.core import safe_pickle
    if share and isinstance(value, list) and value:
        value = [value, value[0], value]  # a container reached twice
    depth, nodes, nbytes = limits

    def verdict(fn):
        try:
            return ("ok", fn(value, depth, nodes, nbytes))
        except safe_pickle._Refused as exc:
            return ("refused", str(exc))

    fast = verdict(safe_pickle._check_tree_fast)
    exact = verdict(safe_pickle._check_tree)
    if fast == ("ok", False):
        return
    assert fast[0] == exact[0], (fast, exact)
