"""Next experiments: attributed findings ranked by the time they explain, each with a candidate
change and an upper bound on the time it could recover (the explained time: removing a cause
cannot give back more than the time it occupied). Risky changes are flagged. gpu_work (busy time
whatever the busy fraction) has no candidate of its own: "reduce GPU work" is gpu_bound's, for
steps bounded by it.

Ranked over the steady-state steps only: cold first steps (warm_up's) are left out of the sums
and of the per-step bound (trials/components.py recomputes that bound over its own measured
steps, after `skip_steps`). warm_up has no candidate: a
once-per-process cost is reported once (summary.warm_up), never ranked as a per-step fix.
transfer_stall's change depends on the kind of copy: the kind that explains most time names it."""

from __future__ import annotations

from .checks.transfer_stall import FIXES

# check -> (candidate change, risk, why the risk)
CANDIDATES = {
    "sync_stall": ("remove or defer the synchronizing call (e.g. keep .item()/.cpu() off the step's hot path, "
                   "log asynchronously, use non_blocking copies with an event)", "low",
                   "behaviour-preserving when the synced value is only logged"),
    "input_starvation": ("feed the GPU faster: more DataLoader workers, pin_memory, prefetch_factor, "
                         "move decoding/augmentation off the training thread", "low",
                         "changes only the input pipeline"),
    "launch_bound": ("cut launches: fuse the small ops (torch.compile), foreach/fused ops (torch._foreach_*, fused "
                     "optimizers), CUDA graphs (torch.compile mode='reduce-overhead'), larger batches", "medium", "graphs freeze shapes and addresses; fusion changes numerics slightly"),
    "host_submission": ("shorten the host work between launches in the span named in the evidence; "
                        "if the thread was runnable but not running, pin it or reduce CPU contention", "medium",
                        "depends on what the host span does"),
    "clock_throttle": ("check cooling and power limits (nvidia-smi -q -d PERFORMANCE); re-run on a cool, "
                       "uncapped GPU to confirm", "low", "an environment change, not a code change"),
    "cpu_contention": ("give the training thread a CPU of its own: pin it (os.sched_setaffinity, taskset, numactl) "
                       "away from other busy processes and threads, or lower their priority", "low",
                       "an environment change; the run-queue wait is measured, not inferred"),
    "allocator_churn": ("stop releasing and re-allocating device memory each step: drop torch.cuda.empty_cache() from "
                        "the loop, keep tensor shapes stable, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                        "low", "memory use can grow; numerics unchanged"),
    "transfer_stall": ("take the copy off the critical path (the change depends on the kind of copy)", "low",
                       "pinned memory and async copies keep numerics; pinned host memory is a finite resource"),
    "compilation": ("stop compiling inside the loop: mark the changing dimension dynamic (torch._dynamo.mark_dynamic, "
                    "torch.compile(dynamic=True)), bucket/pad shapes, or warm the autotuner before the loop", "medium",
                    "dynamic shapes can produce slower kernels than specialised ones"),
    "host_work": ("shorten the host work in the spans named in the evidence (host-only: no GPU was observed)",
                  "medium", "depends on what the host span does"),
    "gc_pause": ("take Python's garbage collection out of the steps: gc.freeze() after setup, automatic collection "
                 "off (gc.disable()) and gc.collect() every N steps, on the same step on every rank", "low",
                 "memory held by cycles grows between scheduled collections"),
    "checkpoint_stall": ("checkpoint asynchronously: torch.distributed.checkpoint.async_save with a pinned staging "
                         "buffer, so the step waits only for the device->host copy; or save less often", "low",
                         "the staging buffer holds a copy of the state in host memory"),
    "kernel_slowdown": ("find why the same kernels ran slower (the evidence names clocks, throttle reasons or other "
                        "processes on the GPU): give the job the GPU to itself, check cooling and power limits",
                        "low", "an environment change, not a code change"),
    "gpu_bound": ("reduce GPU work: mixed precision, better kernels (torch.compile, cuDNN/cuBLAS settings), "
                  "less recomputation", "high", "changes numerics or memory; the bound is all busy time, "
                  "real gains are a fraction of it"),
}


def steady_steps(steps: list[dict]) -> list[dict]:
    """The steps that are not warm-up (no attributed warm_up finding: checks/warm_up.py)."""
    return [st for st in steps
            if not any(f["check"] == "warm_up" and f["verdict"] == "attributed" for f in st["findings"])]


def _transfer_change(kinds: dict[str, int]) -> str:
    if not kinds:
        return FIXES["copy"]
    top = max(sorted(kinds), key=kinds.get)
    return FIXES[top]


def rank(steps: list[dict]) -> list[dict]:
    return ranked(totals(steps))


def totals(steps: list[dict], into: dict | None = None) -> dict:
    """What the ranking needs from the steady-state steps, added to `into`: attributed time and
    steps per check with a candidate, transfer time by kind, and the number of steady steps (steps
    of one rank at a time give what all of them at once give)."""
    acc = {"checks": {}, "kinds": {}, "steady": 0} if into is None else into
    checks, kinds = acc["checks"], acc["kinds"]
    for st in steady_steps(steps):
        acc["steady"] += 1
        for f in st["findings"]:
            if f["verdict"] != "attributed" or f["check"] not in CANDIDATES or f["explains_ns"] <= 0:
                continue
            t = checks.setdefault(f["check"], {"ns": 0, "steps": 0})
            t["ns"] += f["explains_ns"]
            t["steps"] += 1
            if f["check"] == "transfer_stall":
                for k, b in f["evidence"].get("by_kind", {}).items():
                    kinds[k] = kinds.get(k, 0) + int(b.get("critical_ns", 0))
    return acc


def ranked(acc: dict) -> list[dict]:
    """The ranked next experiments from `totals`."""
    ordered = sorted(acc["checks"].items(), key=lambda kv: (-kv[1]["ns"], kv[0]))
    out = []
    for i, (check, t) in enumerate(ordered, 1):
        change, risk, why = CANDIDATES[check]
        if check == "transfer_stall":
            change = _transfer_change(acc["kinds"])
        out.append({
            "rank": i, "check": check, "candidate_change": change,
            "recoverable_upper_bound_ns": int(t["ns"]), "steps": t["steps"],
            "per_step_upper_bound_ns": int(t["ns"] // max(acc["steady"], 1)),
            "risk": risk, "risk_note": why,
        })
    return out
