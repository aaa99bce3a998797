"""A restricted unpickler for pickles we did not write (NCCL flight-recorder dumps).

`pickle.load` on untrusted bytes runs arbitrary code: GLOBAL/STACK_GLOBAL/INST/OBJ
name a callable, REDUCE calls it. Two independent guards: the opcode stream is first
checked against an allowlist of container/scalar opcodes, and the unpickler itself
refuses every global (so no callable can ever reach the stack) and persistent ids. The
input size is bounded, and the result must be a tree of plain containers and scalars
(dict, list, tuple, str, bytes, int, float, bool, None) no deeper than a limit, without
cycles, and not too large once shared containers are counted each time they are reached. PyTorch's flight recorder pickles with `tag_aggregates=false`, so its
dumps contain only such values and load unchanged.
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
from typing import Any

from .errors import InputError

# A flight-recorder dump of 2000 entries with stack frames is a few MB; 64 MiB leaves room
# for very large buffers. It also bounds memo amplification while loading: each 2-byte
# BINGET pushes one 8-byte reference, so a 64 MiB pickle holds at most ~256 MiB of them.
MAX_BYTES = 64 << 20
# FR dumps nest 5 deep (dump -> entries -> entry -> sizes -> dims); 64 is generous and
# keeps every later recursive walk (json.dumps, our own code) far from Python's limit.
MAX_DEPTH = 64
# Counted over the expanded tree (a shared container counts each time it is reached), so
# a small pickle of doubly-referenced lists cannot blow up into 2**depth work downstream.
MAX_NODES = 20_000_000
# Bytes of str/bytes in the expanded tree (a memo-shared 1 MiB string reached a million
# times is a terabyte to json.dumps later): counted like MAX_NODES, never materialized.
MAX_EXPANDED_BYTES = 256 << 20

# Exact types: subclasses could only come from a resolved global, and none is resolved.
_SCALARS = (str, bytes, int, float, bool, type(None))
_CONTAINERS = (dict, list, tuple)
_ALLOWED = "only dict, list, tuple, str, bytes, int, float, bool and None are allowed"


# Opcodes that only build plain containers and scalars. Everything else is refused
# before unpickling starts: globals and calls (GLOBAL, STACK_GLOBAL, INST, OBJ, REDUCE,
# NEWOBJ[_EX], BUILD, EXT1/2/4), persistent ids, sets, bytearrays and out-of-band buffers.
_ALLOWED_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "NONE", "NEWTRUE", "NEWFALSE",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
    "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    "EMPTY_LIST", "APPEND", "APPENDS", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
    "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
})
_GLOBAL_OPCODES = frozenset({"GLOBAL", "STACK_GLOBAL", "INST"})


class _Refused(Exception):
    """Raised inside the unpickler; turned into an InputError naming the file."""


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves no globals and no persistent ids."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401 - pickle API
        # Every way to obtain a callable (GLOBAL, STACK_GLOBAL, INST, EXT*) goes through
        # here; OBJ/NEWOBJ/REDUCE then need a callable on the stack and find none.
        raise _Refused(f"pickle names the global {module}.{name}; only plain containers and scalars are allowed")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("pickle uses a persistent id; only plain containers and scalars are allowed")


def _scan_opcodes(data: bytes) -> None:
    """Walk the opcode stream (pickletools reads lengths without allocating them) and
    refuse any opcode outside the allowlist, naming it and, for globals, what it names."""
    recent: list[str] = []
    for op, arg, pos in pickletools.genops(io.BytesIO(data)):
        if op.name not in _ALLOWED_OPCODES:
            named = ""
            if op.name in _GLOBAL_OPCODES:
                named = f" naming {arg.replace(' ', '.')}" if isinstance(arg, str) else f" naming {'.'.join(recent[-2:])}"
            raise _Refused(f"opcode {op.name} at byte {pos}{named}; only plain containers and scalars are allowed")
        if isinstance(arg, str):
            recent = (recent + [arg])[-2:]


def _check_tree(root: Any, max_depth: int, max_nodes: int, max_bytes: int = MAX_EXPANDED_BYTES) -> None:
    """Iteratively check types, depth, cycles and expanded size of an unpickled value.

    Each container is expanded once (memoized by id): its expanded size and height are
    computed from its children's, so the walk is linear in the number of objects even
    when the pickle shares containers through its memo.
    """
    sizes: dict[int, int] = {}
    nbytes: dict[int, int] = {}
    heights: dict[int, int] = {}
    if type(root) in (str, bytes) and len(root) > max_bytes:
        raise _Refused(f"pickle expands to more than {max_bytes} bytes of text")
    on_path: set[int] = set()
    # stack items: (obj, children_pushed)
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        obj, expanded = stack.pop()
        if type(obj) in _SCALARS:
            continue
        if type(obj) not in _CONTAINERS:
            raise _Refused(f"pickle holds a {type(obj).__name__}; {_ALLOWED}")
        key = id(obj)
        children = list(obj.keys()) + list(obj.values()) if type(obj) is dict else list(obj)
        if not expanded:
            if key in sizes:
                continue
            if key in on_path:
                raise _Refused("pickle holds a container that contains itself (cycle)")
            if len(on_path) + 1 > max_depth:
                raise _Refused(f"pickle nests deeper than {max_depth} levels")
            on_path.add(key)
            stack.append((obj, True))
            for child in children:
                if type(child) in _CONTAINERS:
                    stack.append((child, False))
                elif type(child) not in _SCALARS:
                    raise _Refused(f"pickle holds a {type(child).__name__}; {_ALLOWED}")
            continue
        on_path.discard(key)
        size, height, text = 1 + len(children), 1, 0
        for child in children:
            if type(child) in _CONTAINERS:
                cid = id(child)
                size += sizes[cid]
                text += nbytes[cid]
                height = max(height, 1 + heights[cid])
            elif type(child) in (str, bytes):
                text += len(child)
        if height > max_depth:
            raise _Refused(f"pickle nests deeper than {max_depth} levels")
        if size > max_nodes:
            raise _Refused(f"pickle expands to more than {max_nodes} values")
        if text > max_bytes:
            raise _Refused(f"pickle expands to more than {max_bytes} bytes of text (shared through its memo)")
        sizes[key], heights[key], nbytes[key] = size, height, text


def loads_restricted(
    data: bytes,
    where: str | os.PathLike,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> Any:
    """Unpickle `data` admitting only plain containers and scalars.

    Any refusal or malformation is a one-line InputError naming `where`; nothing in the
    pickle is ever executed.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputError(where, f"expected pickle bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise InputError(where, f"pickle is {len(data)} bytes, over the {max_bytes}-byte limit")
    if len(data) == 0:
        raise InputError(where, "empty file, expected a pickle")
    data = bytes(data)
    unpickler = RestrictedUnpickler(io.BytesIO(data))
    try:
        _scan_opcodes(data)
        value = unpickler.load()
    except _Refused as exc:
        raise InputError(where, f"refused: {exc}") from None
    except RecursionError:
        raise InputError(where, "refused: pickle nests too deeply to load") from None
    except MemoryError:
        raise InputError(where, "refused: pickle asks for more memory than is available") from None
    # The unpickler reports malformed input with many exception types (UnpicklingError,
    # EOFError, ValueError, KeyError for a bad memo reference, IndexError, TypeError when
    # an opcode meets the wrong stack item, UnicodeDecodeError, OverflowError, ...).
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError,
            AttributeError, OverflowError, UnicodeError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InputError(where, f"not a readable pickle ({type(exc).__name__}: {first})") from None
    try:
        _check_tree(value, max_depth, max_nodes)
    except _Refused as exc:
        raise InputError(where, f"refused: {exc}") from None
    return value
