"""Run a function right after a module finishes importing (the hooks need torch's modules,
but importing torch in every Python process the run starts would cost each of them a second).

A finder first on `sys.meta_path` asks the other finders for the spec of a watched name and
wraps its loader, so the callback runs after the module's code, on the importing thread. A
module already imported gets its callback at once.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable

_callbacks: dict[str, list[Callable]] = {}
_lock = threading.Lock()


class _Loader:
    """The module's own loader, with the callbacks after exec_module."""

    def __init__(self, loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        with _lock:
            todo = _callbacks.pop(self._name, [])
        for fn in todo:
            fn(module)

    def __getattr__(self, attr):  # resource readers, get_source, ...: the real loader's
        return getattr(self._loader, attr)


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


_FINDER = _Finder()


def when_imported(name: str, fn: Callable) -> None:
    """Call fn(module) once `name` is imported (now, if it already is)."""
    mod = sys.modules.get(name)
    if mod is not None and getattr(getattr(mod, "__spec__", None), "_initializing", False) is False:
        fn(mod)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(fn)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
