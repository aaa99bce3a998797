"""Typed record of the runner contract (schemas/steps_out.schema.json): the per-step times a
workload's recorder writes to STALLCASE_STEPS_OUT(_DIR) for the trial runner (plan/metric.py reads it).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: steps_ns and unusual only, each step timed from `with rec.step(i)` entry to exit.
  2: kind, covers, items and tokens; steps cover the whole iteration. A version 1 record reads as
     version 2 with covers "body" and no declared work (records.UPGRADES).
  rank, role and pid were added later within version 2 (optional: older files lack them).
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 2


@typed.record("steps_out", version=SCHEMA_VERSION)
class StepsOut:
    """steps-<rank>-<pid>.json (or STALLCASE_STEPS_OUT): one process's step durations."""

    covers: str = doc("iteration: each step from the previous step's end to its own end; body: the `with rec.step(i)` block only")
    steps_ns: list = doc("per-step durations in step order, ns")
    items: list | None = doc("items each step declared (null entry: none); null when no step declared any")
    tokens: list | None = doc("tokens each step declared, as items")
    unusual: list = doc("what the recorder saw go wrong (dropped events, source errors)")
    rank: int | None = doc("the process's RANK; null (or absent): none", optional=True, absent=None)
    role: str | None = doc("the process's declared role; null (or absent): none", optional=True, absent=None)
    pid: int = doc("the process id that wrote it", optional=True)

    def work_of(self, per: str) -> list | None:
        """The declared work each step divides by for a metric per `per` (item, token); None per step."""
        return None if per == "step" else getattr(self, f"{per}s")
