"""Next experiments: attributed findings ranked by the time they explain, each with a candidate
change and an upper bound on the time it could recover (the explained time: removing a cause
cannot give back more than the time it occupied). Risky changes are flagged. gpu_work (busy time
whatever the busy fraction) has no candidate of its own: "reduce GPU work" is gpu_bound's, for
steps bounded by it."""

from __future__ import annotations

# check -> (candidate change, risk, why the risk)
CANDIDATES = {
    "sync_stall": ("remove or defer the synchronizing call (e.g. keep .item()/.cpu() off the step's hot path, "
                   "log asynchronously, use non_blocking copies with an event)", "low",
                   "behaviour-preserving when the synced value is only logged"),
    "input_starvation": ("feed the GPU faster: more DataLoader workers, pin_memory, prefetch_factor, "
                         "move decoding/augmentation off the training thread", "low",
                         "changes only the input pipeline"),
    "launch_bound": ("cut launches: CUDA graphs (torch.compile mode='reduce-overhead'), fuse small kernels, "
                     "larger batches", "medium", "graphs freeze shapes and addresses; fusion changes numerics slightly"),
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
    "host_work": ("shorten the host work in the spans named in the evidence (host-only: no GPU was observed)",
                  "medium", "depends on what the host span does"),
    "gpu_bound": ("reduce GPU work: mixed precision, better kernels (torch.compile, cuDNN/cuBLAS settings), "
                  "less recomputation", "high", "changes numerics or memory; the bound is all busy time, "
                  "real gains are a fraction of it"),
}


def rank(steps: list[dict]) -> list[dict]:
    return ranked(totals(steps))


def totals(steps: list[dict], into: dict[str, dict] | None = None) -> dict[str, dict]:
    """Attributed time and steps per check with a candidate, added to `into` (steps of one rank
    at a time give what all of them at once give)."""
    totals = {} if into is None else into
    for st in steps:
        for f in st["findings"]:
            if f["verdict"] != "attributed" or f["check"] not in CANDIDATES:
                continue
            t = totals.setdefault(f["check"], {"ns": 0, "steps": 0})
            t["ns"] += f["explains_ns"]
            t["steps"] += 1
    return totals


def ranked(totals: dict[str, dict]) -> list[dict]:
    ordered = sorted(totals.items(), key=lambda kv: (-kv[1]["ns"], kv[0]))
    out = []
    for i, (check, t) in enumerate(ordered, 1):
        change, risk, why = CANDIDATES[check]
        out.append({
            "rank": i, "check": check, "candidate_change": change,
            "recoverable_upper_bound_ns": int(t["ns"]), "steps": t["steps"],
            "risk": risk, "risk_note": why,
        })
    return out
