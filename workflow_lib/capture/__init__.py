"""Flight recorder: keep the moments before a delay, within budgets, and snapshot them.

Public API: `FlightRecorder`, `Budget`, `LatencyTrigger` (see recorder.py). In a trial run the
recorder also writes its steps for the runner: types.py `StepsOut` (schemas/steps_out.schema.json).

In: the user's workload. Out: incidents/<incident>/ (manifest.json + tables/). A user's incident
is recorded by their workload or `stallcase record` (in-process for a Python program, inprocess/;
from outside for any other, sidecar.py); the workflow captures only the built-in demo, by rule
`capture_demo` (rules/capture.smk) through demo.capture.

The names are imported when first used (PEP 562): every Python process of a run under
`stallcase record` imports this package at start-up (inprocess/site/sitecustomize.py), and one
that never records should not pay for NumPy and pyarrow.
"""

__all__ = ["FlightRecorder", "Budget", "LatencyTrigger"]


def __getattr__(name: str):
    if name == "FlightRecorder":
        from .recorder import FlightRecorder

        return FlightRecorder
    if name == "Budget":
        from .budget import Budget

        return Budget
    if name == "LatencyTrigger":
        from .trigger import LatencyTrigger

        return LatencyTrigger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
