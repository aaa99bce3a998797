"""Flight recorder: keep the moments before a delay, within budgets, and snapshot them.

Public API: `FlightRecorder`, `Budget`, `LatencyTrigger` (see recorder.py). In a trial run the
recorder also writes its steps for the runner: types.py `StepsOut` (schemas/steps_out.schema.json).

In: the user's workload. Out: incidents/<incident>/ (manifest.json + tables/). A user's incident
is recorded by their workload or `stallcase record`; the workflow captures only the built-in
demo, by rule `capture_demo` (rules/capture.smk) through demo.capture.
"""

from .budget import Budget
from .recorder import FlightRecorder
from .trigger import LatencyTrigger

__all__ = ["FlightRecorder", "Budget", "LatencyTrigger"]
