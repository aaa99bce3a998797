"""The small trial design the README-path end-to-end tests share (own workload, producer/consumer,
torchrun): 6 blocks of one run per arm, so each test finishes in about two minutes on 2 cores.
Only the metric (and whether each run is diagnosed) differs between them."""

from __future__ import annotations


def trials_yaml(metric: str, *, record_runs: bool | None = None, blocks: int = 6) -> str:
    """The `trials:` block of the test's my.yaml; `metric` is the flow mapping's inside."""
    lines = ["trials:", f"  blocks: {blocks}", "  runs_per_arm: 1", "  control_runs: 1", "  warmup_runs: 0",
             "  seed: 20261201", "  max_retries: 1", "  max_failed_fraction: 0.34", "  confidence: 0.95",
             "  run_timeout_s: 120"]
    if record_runs is not None:
        lines.append(f"  record_runs: {'true' if record_runs else 'false'}")
    lines.append(f"  metric: {{{metric}}}")
    return "\n" + "\n".join(lines) + "\n"
