"""A restricted unpickler for pickles we did not write (NCCL flight-recorder dumps).

`pickle.load` on untrusted bytes runs arbitrary code: GLOBAL/STACK_GLOBAL/INST/OBJ
name a callable, REDUCE calls it. The unpickler is CPython's C `pickle.Unpickler` with
`find_class` refusing every global (every way to obtain a callable, EXT1/2/4 included,
goes through it, so REDUCE/OBJ/NEWOBJ/BUILD find nothing to call) and `persistent_load`
refusing persistent ids; out-of-band buffers are refused because no buffers are given.
The input size is bounded, and the result must be a tree of plain containers and scalars
(dict, list, tuple, str, bytes, int, float, bool, None: a set, bytearray or memoryview
is refused) no deeper than a limit, without cycles, and not too large once shared
containers are counted each time they are reached. PyTorch's flight recorder pickles
with `tag_aggregates=false`, so its dumps contain only such values and load unchanged.

Until issue 26 a pure-Python opcode scan (pickletools.genops) ran first as a second
guard, and the tree check walked every value in Python: together ~85 ms of a 64-rank
import's ~170 ms per dump. Now the tree check runs level by level with C-level iteration
(`_check_tree_fast`), falling back to the exact per-object walk only when a container is
reached twice (memo sharing or a cycle), and the cyclic GC is paused while the unpickler
builds the tree (it would rescan every dump already held). What the scan gave is kept:
globals are refused by `find_class` (naming them), other opcodes can only yield plain
values or values the tree check refuses, and a declared length past the end of the data
fails in the C unpickler as truncated input (or as a refused allocation, never filled).
"""

from __future__ import annotations

import gc
import io
import os
import pickle
from itertools import chain, compress
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


_TEXT = frozenset({str, bytes})
_CONTAINER_TYPES = frozenset(_CONTAINERS)
_PLAIN_TYPES = frozenset(_SCALARS + _CONTAINERS)


def _check_tree_fast(root: Any, max_depth: int, max_nodes: int, max_bytes: int = MAX_EXPANDED_BYTES) -> bool:
    """The checks of `_check_tree`, one tree level at a time with C-level iteration.

    Returns False, having refused nothing, when a non-empty container is reached twice
    (memo sharing or a cycle): its expanded size is then not the number of objects held,
    and the exact walk decides. Otherwise the counts are those `_check_tree` computes:
    each container is 1 plus one per child slot, text is every str/bytes child's length.
    """
    if type(root) not in _PLAIN_TYPES:
        raise _Refused(f"pickle holds a {type(root).__name__}; {_ALLOWED}")
    if type(root) in _TEXT and len(root) > max_bytes:
        raise _Refused(f"pickle expands to more than {max_bytes} bytes of text")
    if type(root) not in _CONTAINER_TYPES:
        return True
    level, depth, nodes, text = [root], 1, 1, 0
    seen = {id(root)}
    while level:
        dicts = [c for c in level if type(c) is dict]
        seqs = [c for c in level if type(c) is not dict] if len(dicts) < len(level) else []
        children = list(chain(chain.from_iterable(map(dict.keys, dicts)), chain.from_iterable(map(dict.values, dicts)),
                              chain.from_iterable(seqs)))
        types = list(map(type, children))
        bad = set(types) - _PLAIN_TYPES
        if bad:
            raise _Refused(f"pickle holds a {sorted(t.__name__ for t in bad)[0]}; {_ALLOWED}")
        text += sum(map(len, compress(children, map(_TEXT.__contains__, types))))
        if text > max_bytes:
            raise _Refused(f"pickle expands to more than {max_bytes} bytes of text (shared through its memo)")
        inner = list(compress(children, map(_CONTAINER_TYPES.__contains__, types)))
        nodes += len(children) + len(inner)
        if nodes > max_nodes:
            raise _Refused(f"pickle expands to more than {max_nodes} values")
        if inner and depth + 1 > max_depth:
            raise _Refused(f"pickle nests deeper than {max_depth} levels")
        level = list(compress(inner, inner))  # non-empty ones: an empty container has nothing below it
        before = len(seen)
        seen.update(map(id, level))
        if len(seen) - before != len(level):
            return False
        depth += 1
    return True



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
    unpickler = RestrictedUnpickler(io.BytesIO(bytes(data)))
    paused = gc.isenabled()
    gc.disable()  # each allocation burst would start a GC pass over the caller's whole heap (the dumps already read)
    try:
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
    finally:
        if paused:
            gc.enable()
    try:
        if not _check_tree_fast(value, max_depth, max_nodes):
            _check_tree(value, max_depth, max_nodes)
    except _Refused as exc:
        raise InputError(where, f"refused: {exc}") from None
    return value
