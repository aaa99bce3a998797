"""Typed record of the comparison stage (schemas/comparison.schema.json).

Version history (bump SCHEMA_VERSION, and the schema's schema_version, when a field changes meaning):
  1: first version.
  2: components[], change_explained, predictions, sentence (required from 2 on; a version 1
     record cannot be upgraded: re-run the compare rule).
"""

from __future__ import annotations

from ..core import typed
from ..core.typed import doc

SCHEMA_VERSION = 2


@typed.record("comparison", version=SCHEMA_VERSION)
class Comparison:
    """comparison.json: candidate vs baseline over the plan's blocks, and the verdict (compare/build.py)."""

    incident_id: str = doc("the incident the plan derives from")
    experiment: str | None = doc("the named experiment, null for none")
    plan_digest: str = doc("blake3 digest of the plan record compared")
    execution_digests: dict = doc("block id -> digest of its execution record")
    aa_experiment: bool = doc("the candidate is the baseline itself (deliberate A/A run)")
    metric: dict = doc("what a run's value is (the plan's resolved metric) and its unit")
    design: dict = doc("the plan's design, summarized")
    method: dict = doc("the estimator, interval and decision rule used (docs/statistics.md)")
    counts: dict = doc("blocks planned, used and excluded; runs per arm")
    estimate: dict = doc("candidate vs baseline (B/A) with its interval")
    noise_floor: dict = doc("the A/A (A vs A') difference the design cannot tell from noise")
    mde: dict = doc("minimal detectable effect of the design")
    verdict: str = doc("faster, slower, no_detectable_change or inconclusive (compare/verdict.py VERDICTS)")
    reasons: list = doc("why this verdict, most decisive first")
    blocks: list = doc("each block: used or excluded (with the reason), its ratio")
    components: list = doc("per component of the step time: candidate - baseline with its own A/A floor")
    change_explained: dict = doc("how much of the change the components explain")
    predictions: list = doc("the baseline runs' next_experiments bound beside the realized change of that cause")
    sentence: str = doc("the verdict with the components that explain it")
    failure_summary: str = doc("when runs failed: how many blocks had a failed run and the most common reason (exit, rank, exception)", optional=True)
