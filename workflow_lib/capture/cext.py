"""The optional C extensions, built by setup.py where a compiler exists: `span` (_spanext.c,
the span path of sources/host.py) and `step` (_stepext.c, the step path of step_core.py and the
step-boundary sched marks of sources/sched_marks.py). Each is None where it is not built, or
with STALLCASE_SPAN_PATH=python; its Python path then writes the same rows. `PATH` says which
span path is in use.
"""

from __future__ import annotations

import os

_FORCED_PYTHON = os.environ.get("STALLCASE_SPAN_PATH", "").strip().lower() == "python"

try:  # optional; see setup.py
    from . import _spanext as span  # type: ignore
except ImportError:  # not built (no compiler, Python < 3.11): the Python path records the same rows
    span = None
try:
    from . import _stepext as step  # type: ignore
except ImportError:
    step = None
if _FORCED_PYTHON:
    span = step = None
PATH = "c" if span is not None else "python"
