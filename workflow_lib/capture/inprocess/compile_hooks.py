"""Compilation and autotuning as recorder spans, with no edit to the program: torch._dynamo's
compile callbacks ("dynamo.compile"), the compiler's entry points through sys.monitoring
("dynamo.compile.frame", "inductor.*": Python >= 3.12), Triton's autotuner benchmarks
("triton.autotune.benchmark"). Every name matches the diagnosis's compilation pattern
(core/vocabulary.py COMPILE_RE).

Moved here from examples/gpu/h200_data_movement.py, which made the developers' captures right
(a recompile step went from 94% unexplained to named); the example now calls this module.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
from typing import Callable

# Compiler entry points whose whole run is compilation, named in the recorder by their code
# objects (sys.monitoring, Python >= 3.12): dynamo's per-frame compile (bytecode tracing, the
# backend, guards: torch._dynamo's compile callbacks fire only around part of it, 1.2 of 2.6 s
# on the H200's recompile step), inductor's graph compile (forward, and backward in the autograd
# thread, compiled lazily on the first backward), and inductor's first-run autotune. A code
# object, unlike a module attribute, is the same whichever name a caller imported it under.
COMPILE_ENTRY_POINTS = (
    ("torch._dynamo.convert_frame", "_compile", "dynamo.compile.frame"),
    ("torch._inductor.compile_fx", "compile_fx_inner", "inductor.compile_fx_inner"),
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner.benchmark_all_configs",
     "inductor.CachingAutotuner.benchmark_all_configs"),
)


def monitor_spans(span: Callable, entries=COMPILE_ENTRY_POINTS, when_imported: Callable | None = None) -> list[str]:
    """Open `span(name)` for every run of each (module, qualname, name) entry's code, on the
    thread that runs it: PY_START/PY_RETURN as local events on those code objects only.
    Returns what was installed, one line each.

    Nothing here costs a program that never compiles: an entry's module is not imported for it
    (importing inductor's compile_fx takes seconds and thousands of modules); with
    `when_imported(module, fn)` (post_import.when_imported) its code object is watched once the
    program imports that module itself, else only entries already imported are watched. And
    PY_UNWIND, which sys.monitoring only has as a global event (every Python frame an exception
    leaves, in every function: ~10% on Python calls, measured on 3.12), is switched on only while
    a compile span is open, to close the span of a compile that raises."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return ["no compile entry-point spans (sys.monitoring needs Python >= 3.12)"]
    tool = next((t for t in range(6) if mon.get_tool(t) is None), None)
    if tool is None:
        return ["no sys.monitoring tool id free"]
    mon.use_tool_id(tool, "stallcase-compile-spans")
    names: dict = {}
    local = threading.local()
    open_count = [0]
    lock = threading.Lock()

    def start(code, _offset):
        name = names.get(code)
        if name is not None:
            cm = span(name)
            cm.__enter__()
            local.__dict__.setdefault("open", []).append((code, cm))
            with lock:
                open_count[0] += 1
                if open_count[0] == 1:
                    mon.set_events(tool, mon.events.PY_UNWIND)

    def stop(code, _offset, _value):
        stack = local.__dict__.get("open")
        if code in names and stack and stack[-1][0] is code:
            stack.pop()[1].__exit__(None, None, None)
            with lock:
                open_count[0] -= 1
                if open_count[0] == 0:
                    mon.set_events(tool, 0)

    mon.register_callback(tool, mon.events.PY_START, start)
    mon.register_callback(tool, mon.events.PY_RETURN, stop)
    mon.register_callback(tool, mon.events.PY_UNWIND, stop)

    def watch(module, qual, span_name, mod) -> str:
        try:
            obj = mod
            for part in qual.split("."):
                obj = getattr(obj, part)
            code = inspect.unwrap(obj).__code__
        except (AttributeError, RuntimeError) as exc:
            return f"no span for {module}.{qual} ({type(exc).__name__})"
        names[code] = span_name
        mon.set_local_events(tool, code, mon.events.PY_START | mon.events.PY_RETURN)
        return f"{module}.{qual} -> span {span_name}"

    out = []
    for module, qual, span_name in entries:
        mod = sys.modules.get(module)
        if mod is not None:
            out.append(watch(module, qual, span_name, mod))
        elif when_imported is not None:
            when_imported(module, lambda m, a=(module, qual, span_name): watch(*a, m))
            out.append(f"{module}.{qual} -> span {span_name} (once imported)")
        else:
            try:
                out.append(watch(module, qual, span_name, importlib.import_module(module)))
            except ImportError as exc:  # a module absent or failing to import here
                out.append(f"no span for {module}.{qual} ({type(exc).__name__})")
    return out


def dynamo_callbacks(span: Callable) -> list[str]:
    """torch._dynamo's compile start/end callbacks -> span "dynamo.compile"."""
    try:
        from torch._dynamo.callback import callback_handler
    except (ImportError, AttributeError) as exc:
        return [f"no dynamo compile callbacks ({type(exc).__name__})"]
    local = threading.local()

    def start(*_a, **_k):
        cm = span("dynamo.compile")
        cm.__enter__()
        local.__dict__.setdefault("open", []).append(cm)

    def end(*_a, **_k):
        stack = local.__dict__.get("open")
        if stack:
            stack.pop().__exit__(None, None, None)

    callback_handler.register_start_callback(start)
    callback_handler.register_end_callback(end)
    return ["torch._dynamo callback_handler start/end -> span dynamo.compile"]


def triton_autotune(span: Callable, around: Callable | None = None) -> list[str]:
    """Triton's Autotuner._bench -> span "triton.autotune.benchmark"; `around(name)`, when given,
    is one more context manager entered inside it (the example's Kineto annotation)."""
    try:
        from triton.runtime import autotuner
    except (ImportError, AttributeError) as exc:
        return [f"no triton autotuner hook ({type(exc).__name__})"]
    orig = autotuner.Autotuner._bench
    if getattr(orig, "_stallcase", False):
        return ["triton Autotuner._bench already hooked"]

    def bench(self, *a, **k):
        with span("triton.autotune.benchmark"):
            if around is None:
                return orig(self, *a, **k)
            with around("triton.autotune.benchmark"):
                return orig(self, *a, **k)

    bench._stallcase = True
    autotuner.Autotuner._bench = bench
    return ["triton Autotuner._bench -> span triton.autotune.benchmark"]


def install(span: Callable, around: Callable | None = None) -> list[str]:
    """All three; `span(name)` returns a context manager (a recorder's `span`)."""
    return dynamo_callbacks(span) + monitor_spans(span) + triton_autotune(span, around)
