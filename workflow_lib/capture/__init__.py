"""Flight recorder: keep the moments before a delay, within budgets, and snapshot them.

Public API: `FlightRecorder`, `Budget`, `LatencyTrigger` (see recorder.py).
"""

from .budget import Budget
from .recorder import FlightRecorder
from .trigger import LatencyTrigger

__all__ = ["FlightRecorder", "Budget", "LatencyTrigger"]
