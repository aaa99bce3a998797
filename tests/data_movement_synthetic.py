"""Synthetic incidents of the shape examples/gpu/h200_data_movement.py captures (the CPU twin of
the H200 fixtures): 20 steps of a trainer fed by a DataLoader, a cold first step (worker start,
lazy init, allocator growth), and one cause per incident at known steps, with the truth in the
same form as the capture's truth.json."""

from __future__ import annotations

from builders import api, clock, kernel, make_incident, memcpy, span, step

MS, US = 1_000_000, 1_000
STEPS = 20
CASES = {  # case: (injected steps, cause, intended check, min share)
    "cold_start": ((), None, "warm_up", None),
    "pageable": ((6, 11, 16), "pageable_htod", "transfer_stall", 0.8),
    "item": ((5, 10, 15), "sync_dtoh_item", "transfer_stall", 0.5),
    "dtoh_pack": ((7, 12, 17), "dtoh_pack", "transfer_stall", 0.8),
    "recompile": ((8, 14), "recompile", "compilation", 0.8),
    "autotune": ((9, 15), "late_autotune", "compilation", 0.8),
}


class _Trace:
    def __init__(self):
        self.rows = {k: [] for k in ("steps", "kernels", "memcpy", "runtime_api", "spans", "clock_sync")}
        self.corr = 1

    def launch(self, t: int, dur: int, name: str = "gemm", not_before: int = 0) -> int:
        """A kernel launched at host time t, running from t + 10 us (or, queued behind earlier
        work on its stream, from `not_before`) for `dur`; returns its end."""
        self.rows["runtime_api"].append(api(t, t + 5 * US, corr=self.corr))
        k0 = max(t + 10 * US, not_before)
        self.rows["kernels"].append(kernel(k0, k0 + dur, corr=self.corr, name=name))
        self.corr += 1
        return k0 + dur

    def copy(self, t: int, call_ns: int, start: int, end: int, **kw) -> None:
        self.rows["runtime_api"].append(api(t, t + call_ns, name="cudaMemcpyAsync", corr=self.corr))
        self.rows["memcpy"].append(memcpy(start, end, corr=self.corr, **kw))
        self.corr += 1


def incident(case: str):
    """(Incident, truth) for one case."""
    steps_at, cause, check, share = CASES[case]
    tr = _Trace()
    rows = tr.rows
    t = 0
    for i in range(STEPS):
        s0 = t
        inj = i in steps_at
        wait = 300 * MS if i == 0 else 500 * US  # the first next(): worker start
        rows["spans"].append(span("data.next_batch", t, t + wait, depth=1))
        t += wait
        tr.copy(t, 8 * US, t + 10 * US, t + 110 * US, kind="HtoD", nbytes=1 << 20, src_kind="pinned", dst_kind="device",
                is_async=True)
        t += 120 * US
        if i == 0:  # lazy init: handles, module loading, allocator growth (5 ms in cudaMalloc)
            for k in range(20):
                rows["runtime_api"].append(api(t + k * 40 * MS, t + k * 40 * MS + 250 * US, name="cudaMalloc"))
            t += 800 * MS
        if inj and case == "pageable":
            rows["spans"].append(span("data.extra_features", t, t + 30 * MS, depth=1))
            tr.copy(t, 30 * MS, t + 20 * US, t + 30 * MS, kind="HtoD", nbytes=256 << 20, src_kind="pageable",
                    dst_kind="device", is_async=True)
            t += 30 * MS + 10 * US
        f0 = t
        if inj and case == "recompile":
            rows["spans"].append(span("_compile.compile_inner (dynamo_timed)", t, t + 50 * MS, depth=2))
            t += 50 * MS
        if inj and case == "autotune":
            b0 = t
            for _ in range(4):  # each config benchmarked: its kernels run, the host waits
                for _ in range(10):
                    t = tr.launch(t, 2 * MS, name="scale_add")
            rows["spans"].append(span("triton.autotune.benchmark", b0, t, depth=2))
        gpu = t
        for k in range(20):
            if inj and case == "dtoh_pack" and k == 10:  # 512 MiB into pinned memory on the training stream
                tr.copy(t, 8 * US, max(t, gpu) + 10 * US, max(t, gpu) + 6 * MS, kind="DtoH", nbytes=512 << 20,
                        src_kind="device", dst_kind="pinned", is_async=True)
                gpu = max(t, gpu) + 6 * MS
                t += 10 * US  # non_blocking: the host goes on launching; the kernels queue behind the copy
            if gpu > t:  # the host runs ahead while the stream drains the queue
                gpu = tr.launch(t, 400 * US, not_before=gpu)
                t += 20 * US
            else:
                t = gpu = tr.launch(t, 400 * US)
        t = max(t, gpu)
        rows["spans"].append(span("forward", f0, t, depth=1))
        if inj and case == "item":  # 16 x loss_i.item(): an async DtoH into torch's pinned staging, a sync, Python
            m0 = t  # (what the H200 shows: cudaMemcpyAsync device -> pinned, then cudaStreamSynchronize)
            for _ in range(16):
                tr.copy(t, 60 * US, t + 50 * US, t + 55 * US, kind="DtoH", nbytes=4, src_kind="device", dst_kind="pinned",
                        is_async=True)
                rows["runtime_api"].append(api(t + 60 * US, t + 70 * US, name="cudaStreamSynchronize", is_sync=True))
                t += 300 * US
            rows["spans"].append(span("metrics.per_sample", m0, t, depth=1))
        t += 100 * US
        rows["steps"].append(step(i, s0, t))
        rows["spans"].append(span(f"ProfilerStep#{i}", s0, t))
    rows["clock_sync"].append(clock(0, 1 * US))
    truth = {"case": case, "form": "synthetic", "steps_total": STEPS,
             "injected": {cause: list(steps_at)} if cause else {}, "intended_check": {cause: check} if cause else {},
             "accepted_causes": {cause: [check]} if cause else {}, "min_right_share": {cause: share} if cause else {},
             "warm_up_steps": [0]}
    return make_incident(incident_id=f"{case}-synthetic", **rows), truth
