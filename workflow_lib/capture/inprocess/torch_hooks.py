"""What the in-process capture sees of a PyTorch program with no edit to it.

Each installer patches one place torch calls once per batch, step, save or collective (never
per operator), records through the session (a no-op while this process has no recorder) and
returns one line saying what it installed, for the manifest's `recorder.inprocess.hooks`.

  optimizer   torch's global optimizer step hooks: span "optimizer.step"; the steps
  dataloader  DataLoader iterators' __next__: span "dataloader.next" (the wait for the batch)
  modules     the root modules (built as nn.Module, not a child of another, with parameters):
              span "forward" through per-module hooks, registered at the first optimizer step
  backward    torch.autograd.backward (Tensor.backward calls it): span "backward"
  checkpoint  torch.save: span "checkpoint.save" (bytes when the target is a path or a file);
              torch.distributed.checkpoint save/async_save: "checkpoint.dcp_save"/"checkpoint.dcp_async_save"
  c10d        torch.distributed's collectives called from Python: span "c10d.<name>"
  profiler    the program's own record_function names (and ProfilerStep#N, the steps when no
              optimizer steps): spans of those names
  sync reads  Tensor.item/.cpu/.tolist on a CUDA tensor: span "sync.<name>" (only when CUDA is
              available: on a CPU tensor they are ordinary reads)
"""

from __future__ import annotations

import functools
import os
import threading
import weakref

from ..clock import now_ns
from . import compile_hooks
from .post_import import when_imported

C10D_CALLS = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
              "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list",
              "reduce", "gather", "scatter", "barrier", "send", "recv")
SYNC_READS = ("item", "cpu", "tolist")


def _not_compiling() -> bool:
    return False


def compiling():
    """torch.compiler.is_compiling: while dynamo traces a hooked call it is True (a constant to
    the tracer), so a wrapper traced into a compiled graph is just the call it wraps and adds no
    graph break."""
    import torch

    return getattr(getattr(torch, "compiler", None), "is_compiling", _not_compiling)


# torch's own record_function names, already spans of their own under these hooks.
TORCH_OWN_NAMES = ("enumerate(DataLoader)", "Optimizer.", "Optimizer.zero_grad", "## ")


def _timed(session, name: str, fn, detail=None):
    """fn wrapped in a span `name` (the recorder's span: C when built); with `detail(args, kwargs)`
    -> bytes, timed here and written with its bytes to span_details too (a save: rare)."""
    is_compiling = compiling()
    if detail is None:
        @functools.wraps(fn)
        def spanned(*args, **kwargs):
            if is_compiling():
                return fn(*args, **kwargs)
            span = session.span(name)  # the C span path when built: a few hundred ns
            span.__enter__()
            try:
                return fn(*args, **kwargs)
            finally:
                span.__exit__(None, None, None)
        spanned._stallcase = True
        return spanned

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        host = session.host()
        if host is None:
            return fn(*args, **kwargs)
        t0 = now_ns()
        try:
            out = fn(*args, **kwargs)
        finally:
            t1 = now_ns()
        nbytes = -1
        try:
            nbytes = detail(args, kwargs)
        except Exception:  # a size we cannot read is unknown, never the program's error
            pass
        host.record_detail(name, t0, t1, nbytes=nbytes)
        return out
    wrapper._stallcase = True
    return wrapper


def _patch(obj, attr: str, session, name: str, detail=None) -> bool:
    fn = getattr(obj, attr, None)
    if fn is None or getattr(fn, "_stallcase", False):
        return False
    setattr(obj, attr, _timed(session, name, fn, detail))
    return True


def optimizer(session) -> list[str]:
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    local = threading.local()

    def pre(opt, args, kwargs):
        local.span = span = session.span("optimizer.step")
        span.__enter__()

    def post(opt, args, kwargs):
        span = getattr(local, "span", None)
        if span is not None:
            local.span = None
            span.__exit__(None, None, None)
        session.optimizer_step(opt, now_ns())

    register_optimizer_step_pre_hook(pre)
    register_optimizer_step_post_hook(post)
    return ["torch.optim global step pre/post hooks -> span optimizer.step; steps from optimizer steps"]


def dataloader(session) -> list[str]:
    from torch.utils.data import dataloader as dl

    orig = dl._BaseDataLoaderIter.__next__

    def __next__(self):
        if session.first_activity_ns is None:  # step 0 starts at the first batch, recorded or not
            session.activity(now_ns())
        span = session.span("dataloader.next")
        span.__enter__()
        try:
            return orig(self)
        finally:
            span.__exit__(None, None, None)

    dl._BaseDataLoaderIter.__next__ = __next__
    return ["DataLoader iterator __next__ -> span dataloader.next"]


class RootModules:
    """Every nn.Module built (weakly); at the first optimizer step the roots get forward hooks."""

    def __init__(self, session):
        self.session = session
        self.built = weakref.WeakSet()
        self.hooked = False
        self.local = threading.local()
        self._orig_init = None  # set by install(); without it (left out) there is nothing to hook

    def install(self) -> list[str]:
        import torch

        orig = torch.nn.Module.__init__
        built = self.built

        @functools.wraps(orig)
        def __init__(mod, *a, **k):
            orig(mod, *a, **k)
            try:
                built.add(mod)
            except TypeError:
                pass

        torch.nn.Module.__init__ = __init__
        self._orig_init = orig
        return ["nn.Module roots (seen at construction) -> span forward, hooked at the first optimizer step"]

    def hook_roots(self) -> int:
        """Per-module forward hooks on the roots; the construction watch is removed."""
        import torch

        if self.hooked or self._orig_init is None:
            return 0
        self.hooked = True
        torch.nn.Module.__init__ = self._orig_init
        mods = list(self.built)
        self.built = weakref.WeakSet()
        children = {id(c) for m in mods for c in m.children()}
        roots = [m for m in mods if id(m) not in children and next(m.parameters(), None) is not None]
        local, session = self.local, self.session
        is_compiling = compiling()

        def pre(mod, args):
            if is_compiling():
                return
            d = getattr(local, "depth", 0)
            if d == 0:
                local.span = span = session.span("forward")
                span.__enter__()
            local.depth = d + 1

        def post(mod, args, out):
            if is_compiling():
                return
            local.depth = d = getattr(local, "depth", 1) - 1
            if d == 0:
                local.span.__exit__(None, None, None)

        for m in roots:
            m.register_forward_pre_hook(pre)
            m.register_forward_hook(post, always_call=True)
        _pickle_without(torch.nn.Module, (pre, post))
        return len(roots)


def _pickle_without(module_cls, ours: tuple) -> None:
    """A module pickles (torch.save, pickle.dumps, copy.deepcopy) with its hooks, and the roots'
    hooks are the recorder's closures: they cannot be pickled, nor should they travel in the
    program's checkpoint or copy. Found on PyTorch's word_language_model, which saves the whole
    model each epoch: under `stallcase record` the save raised "Can't pickle local object".
    Module's own __getstate__ already returns a copy of the module's __dict__; this drops our
    hooks from that copy, so every way of pickling sees the module as the program built it, and
    the live module keeps its hooks."""
    orig = module_cls.__getstate__
    if getattr(orig, "_stallcase", False):
        return

    @functools.wraps(orig)
    def __getstate__(mod):
        state = orig(mod)
        ids = [k for key in ("_forward_pre_hooks", "_forward_hooks")
               for k, h in (state.get(key) or {}).items() if any(h is o for o in ours)]
        if ids:
            drop = set(ids)
            for key in ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_always_called"):
                if key in state:
                    state[key] = type(state[key])((k, v) for k, v in state[key].items() if k not in drop)
        return state

    __getstate__._stallcase = True
    module_cls.__getstate__ = __getstate__


def backward(session) -> list[str]:
    import torch.autograd

    return ["torch.autograd.backward -> span backward"] if _patch(torch.autograd, "backward", session, "backward") else []


def _bytes_of(args, kwargs):
    f = kwargs.get("f", args[1] if len(args) > 1 else None)
    if isinstance(f, (str, os.PathLike)):
        return os.path.getsize(f)
    tell = getattr(f, "tell", None)
    return int(tell()) if tell is not None else -1


def checkpoint(session) -> list[str]:
    import torch
    import torch.serialization

    done = _patch(torch, "save", session, "checkpoint.save", _bytes_of)
    torch.serialization.save = torch.save
    out = ["torch.save -> span checkpoint.save (bytes in span_details)"] if done else []

    def dcp(mod):
        for attr, name in (("save", "checkpoint.dcp_save"), ("async_save", "checkpoint.dcp_async_save"),
                           ("save_state_dict", "checkpoint.dcp_save")):
            _patch(mod, attr, session, name, lambda a, k: -1)
        session.installed.append("torch.distributed.checkpoint save/async_save -> spans checkpoint.dcp_save/_async_save")

    when_imported("torch.distributed.checkpoint", dcp)
    return out


def c10d(session) -> list[str]:
    import torch.distributed as dist

    if not dist.is_available():
        return ["no c10d spans (torch.distributed not available)"]
    from torch.distributed import distributed_c10d as c10d_mod

    n = 0
    for call in C10D_CALLS:
        fn = getattr(c10d_mod, call, None)
        if fn is None or getattr(fn, "_stallcase", False):
            continue
        wrapped = _timed(session, f"c10d.{call}", fn)
        setattr(c10d_mod, call, wrapped)
        if getattr(dist, call, None) is fn:
            setattr(dist, call, wrapped)
        n += 1
    return [f"torch.distributed collectives ({n}) -> spans c10d.<name>"]


def profiler(session) -> list[str]:
    from torch.autograd import profiler as ap

    rf = ap.record_function
    orig_enter, orig_exit = rf.__enter__, rf.__exit__
    local = threading.local()

    def __enter__(self):
        out = orig_enter(self)
        stack = local.__dict__.setdefault("open", [])
        stack.append(now_ns())
        return out

    def __exit__(self, *exc):
        try:
            return orig_exit(self, *exc)
        finally:
            stack = local.__dict__.get("open")
            if stack:
                t0 = stack.pop()
                session.named_region(self.name, t0, now_ns())

    rf.__enter__, rf.__exit__ = __enter__, __exit__
    return ["record_function enter/exit -> spans of the program's names; ProfilerStep#N -> steps when no optimizer steps"]


def sync_reads(session, torch) -> list[str]:
    n = 0
    is_compiling = compiling()
    for attr in SYNC_READS:
        fn = getattr(torch.Tensor, attr)
        name = f"sync.{attr}"

        def make(fn, name):
            @functools.wraps(fn)
            def read(self, *a, **k):
                if not self.is_cuda or is_compiling():
                    return fn(self, *a, **k)
                span = session.span(name)
                span.__enter__()
                try:
                    return fn(self, *a, **k)
                finally:
                    span.__exit__(None, None, None)
            return read

        setattr(torch.Tensor, attr, make(fn, name))
        n += 1
    return [f"Tensor.{'/'.join(SYNC_READS)} on CUDA tensors -> spans sync.<name>"]


# STALLCASE_INPROCESS_OFF=name,name (or "all"): hooks left out, for a program one of them breaks,
# and to take the capture's cost apart (benchmarks/overhead_zero_change.py --arm). "all" keeps
# the optimizer hooks, which make the steps ("all,optimizer": none at all).
OFF_ENV = "STALLCASE_INPROCESS_OFF"
HOOK_NAMES = ("optimizer", "dataloader", "backward", "checkpoint", "c10d", "profiler", "modules", "sync_reads",
              "compile", "gc")


def hooks_off(environ=None) -> frozenset[str]:
    raw = (os.environ if environ is None else environ).get(OFF_ENV, "")
    names = {n.strip() for n in raw.split(",") if n.strip()}
    if "all" in names:  # every hook but the optimizer's, unless that is named too
        names = (names - {"all"}) | (set(HOOK_NAMES) - {"optimizer"})
    return frozenset(names)


def install(session, torch) -> list[str]:
    """Everything above, each on its own (one failing leaves the others)."""
    off = hooks_off()
    out: list[str] = [f"left out ({OFF_ENV}): {', '.join(sorted(off))}"] if off else []
    steps = [optimizer, dataloader, backward, checkpoint, c10d, profiler]
    for fn in steps:
        if fn.__name__ in off:
            continue
        try:
            out += fn(session)
        except Exception as exc:  # an older or newer torch without that place: say so, go on
            out.append(f"no {fn.__name__} hook ({type(exc).__name__}: {exc})")
    if "modules" not in off:
        try:
            out += session.roots.install()
        except Exception as exc:
            out.append(f"no forward spans ({type(exc).__name__}: {exc})")
    try:
        if "sync_reads" in off:
            pass
        elif torch.cuda.is_available():
            out += sync_reads(session, torch)
        else:
            out.append("no sync-read spans (CUDA not available: .item()/.cpu() read host memory)")
    except Exception as exc:
        out.append(f"no sync-read spans ({type(exc).__name__}: {exc})")
    if "compile" in off:
        return out
    when_imported("torch._dynamo", lambda _m: session.installed.extend(
        compile_hooks.dynamo_callbacks(session.span) + compile_hooks.monitor_spans(session.span, when_imported=when_imported)))
    when_imported("triton.runtime.autotuner", lambda _m: session.installed.extend(compile_hooks.triton_autotune(session.span)))
    return out
