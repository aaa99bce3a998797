"""Flight recorder: keep the moments before a delay, within budgets, and snapshot them.

Public API: `FlightRecorder`, `Budget`, `LatencyTrigger` (see recorder.py). In a trial run the
recorder also writes its steps for the runner: types.py `StepsOut` (schemas/steps_out.schema.json).
"""

from .budget import Budget
from .recorder import FlightRecorder
from .trigger import LatencyTrigger

__all__ = ["FlightRecorder", "Budget", "LatencyTrigger"]
