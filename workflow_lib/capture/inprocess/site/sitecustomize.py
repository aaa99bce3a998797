"""Imported at start-up by every Python process of a run under `stallcase record` (the runner
puts this directory first on PYTHONPATH): opens the process's in-process capture session
(workflow_lib/capture/inprocess/session.py), then runs the environment's own sitecustomize,
if it has one, as it would have run without us."""

import os
import sys


def _start() -> None:
    try:
        from workflow_lib.capture.inprocess import session

        session.start_from_env()
    except Exception as exc:  # the program runs as it would without us, and we say why
        print(f"stallcase: in-process capture not started in {sys.executable}: {type(exc).__name__}: {exc}",
              file=sys.stderr)


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401  the environment's own
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if ours is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = ours


_start()
_chain()
