"""STALLCASE_INPROCESS_OFF names the zero-change hooks left out (a program one of them breaks,
and the cost breakdown of benchmarks/overhead_zero_change.py --arm); the optimizer hooks, which
make the steps, stay unless named."""

from __future__ import annotations

import contextlib
import sys

import pytest

from workflow_lib.capture.inprocess import torch_hooks


def test_names_and_all():
    assert torch_hooks.hooks_off({}) == frozenset()
    assert torch_hooks.hooks_off({"STALLCASE_INPROCESS_OFF": " gc, compile ,"}) == {"gc", "compile"}
    everything = torch_hooks.hooks_off({"STALLCASE_INPROCESS_OFF": "all"})
    assert "optimizer" not in everything and everything == set(torch_hooks.HOOK_NAMES) - {"optimizer"}
    assert torch_hooks.hooks_off({"STALLCASE_INPROCESS_OFF": "all,optimizer"}) == set(torch_hooks.HOOK_NAMES)


def test_left_out_hooks_are_not_installed_and_said(monkeypatch):
    class Session:
        installed: list = []
        roots = torch_hooks.RootModules(None)

        def span(self, name):
            raise AssertionError("no span at install")

    import torch

    monkeypatch.setenv("STALLCASE_INPROCESS_OFF", "all,optimizer")  # nothing global left in this process
    before = (torch.save, torch.autograd.backward)
    out = torch_hooks.install(Session(), torch)
    assert out[0].startswith("left out (STALLCASE_INPROCESS_OFF): ")
    assert (torch.save, torch.autograd.backward) == before  # nothing patched
    assert Session.roots.hook_roots() == 0  # no construction watch to turn into forward hooks


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring needs Python >= 3.12 (no CPU twin: "
                    "below 3.12 there are no compile entry-point spans at all)")
def test_compile_entry_points_watched_once_imported_and_unwind_only_while_open(tmp_path, monkeypatch):
    """An entry's module is not imported for it (inductor's compile_fx costs seconds), and the
    global PY_UNWIND event is on only while a compile span is open."""
    from workflow_lib.capture.inprocess import compile_hooks
    from workflow_lib.capture.inprocess.post_import import when_imported

    (tmp_path / "fake_compiler_mod.py").write_text(
        "def compile(x):\n    if x < 0:\n        raise ValueError(x)\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    log = []

    @contextlib.contextmanager
    def span(name):
        log.append(("open", name))
        yield
        log.append(("close", name, sys.monitoring.get_events(tool())))

    def tool():
        return next(t for t in range(6) if sys.monitoring.get_tool(t) == "stallcase-compile-spans")

    out = compile_hooks.monitor_spans(span, (("fake_compiler_mod", "compile", "c.compile"),), when_imported=when_imported)
    try:
        assert out == ["fake_compiler_mod.compile -> span c.compile (once imported)"]
        assert "fake_compiler_mod" not in sys.modules
        import fake_compiler_mod

        fake_compiler_mod.compile(1)
        with pytest.raises(ValueError):
            fake_compiler_mod.compile(-1)
        assert [x[:2] for x in log] == [("open", "c.compile"), ("close", "c.compile")] * 2
        assert all(x[2] == sys.monitoring.events.PY_UNWIND for x in log if x[0] == "close")  # on while open
        assert sys.monitoring.get_events(tool()) == 0  # off again once no span is open
    finally:
        t = tool()
        sys.monitoring.set_events(t, 0)
        sys.monitoring.free_tool_id(t)
