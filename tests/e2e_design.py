"""The small trial design the README-path end-to-end tests share (own workload, producer/consumer,
torchrun): 6 blocks of one run per arm, so each test finishes in about two minutes on 2 cores.
Only the metric (and whether each run is diagnosed) differs between them."""

from __future__ import annotations


def trials_yaml(metric: str, *, record_runs: bool | None = None, blocks: int = 6, confidence: float = 0.95) -> str:
    """The `trials:` block of the test's my.yaml; `metric` is the flow mapping's inside."""
    lines = ["trials:", f"  blocks: {blocks}", "  runs_per_arm: 1", "  control_runs: 1", "  warmup_runs: 0",
             "  seed: 20261201", "  max_retries: 1", "  max_failed_fraction: 0.34", f"  confidence: {confidence:g}",
             "  run_timeout_s: 120"]
    if record_runs is not None:
        lines.append(f"  record_runs: {'true' if record_runs else 'false'}")
    lines.append(f"  metric: {{{metric}}}")
    return "\n" + "\n".join(lines) + "\n"


def busy_warning(comparison: dict) -> str | None:
    """The comparison's warning that other processes loaded the machine during its runs
    (compare/build.py busy_machine_warnings), or None on a quiet machine."""
    return next((w for w in comparison.get("warnings") or [] if w.startswith("the machine was busy")), None)


def check_floor_target(comparison: dict, target_pct: float = 5.0) -> None:
    """Issue 35's floor target, judged where it is defined: on a machine nobody else loads. A run
    that other processes loaded carries the runner's busy note (trials/host_load.py) and the
    comparison says how many did; then a floor over the target is an expected failure that names
    the load, and any floor must come with that warning. Without the warning the target is strict."""
    import pytest

    floor = comparison["noise_floor"]["pct"]
    assert floor is not None, comparison["reasons"]
    busy = busy_warning(comparison)
    if floor < target_pct:
        return
    if busy:
        pytest.xfail(f"floor ±{floor:.1f}% over ±{target_pct:g}%, with {busy.split(':')[0]}")
    raise AssertionError(f"floor ±{floor:.2f}% over ±{target_pct:g}% on a machine no other process loaded: "
                         f"{comparison['noise_floor']}")
