"""Random small incidents holding every kind of evidence the checks read, for comparing the
two diagnosis paths (tests/test_diagnose_batch.py): steps that touch and steps with gaps,
kernels on two streams correlated to launch calls of two threads, synchronizing, allocator
and copy calls, copies of every kind, spans (declared waits, compilation, work, a span around
the whole step, an op whose first call is one-time), scheduler samples that do and do not bracket the gaps, NVML clocks, reasons
and violation counters. Deterministic per seed."""

from __future__ import annotations

import random

from tests.builders import api, clock, kernel, make_incident, memcpy, nvml, sched, span, step

US = 1_000


def random_incident(seed: int, steps: int = 24):
    rng = random.Random(seed)
    rows = {k: [] for k in ("kernels", "memcpy", "runtime_api", "spans", "sched", "nvml", "clock_sync")}
    st, t, corr = [], 0, 0
    launch_heavy = rng.random() < 0.5
    # A logging op whose first call in the recording pays a one-time cost (first_call), on its own
    # generator so that the rest of each seed's incident stays as it was.
    once = random.Random(seed * 7919 + 1)
    first_at = once.randint(2, max(2, steps - 2)) if once.random() < 0.6 else None
    for i in range(steps):
        t += rng.choice([0, 0, 5 * US, 50 * US])  # touching steps and gaps between them
        wall = rng.choice([400, 800, 1200, 3000]) * US * (6 if i in (0, 7) and rng.random() < 0.7 else 1)
        a, b = t, t + wall
        st.append(step(i, a, b))
        rows["spans"].append(span("train_step", a, b))
        x = a + rng.randint(0, 20) * US
        n_launch = rng.choice([5, 120, 200]) if launch_heavy else rng.randint(0, 8)
        for _ in range(n_launch):
            tid = 1 if rng.random() < (0.95 if launch_heavy else 0.8) else 2
            ld = rng.randint(2, 12) * US
            if x + ld >= b:
                break
            rows["runtime_api"].append(api(x, x + ld, corr=corr, thread_id=tid))
            ks = x + ld + rng.randint(0, 30) * US
            kd = rng.choice([1, 2, 2, 5] if launch_heavy else [1, 2, 5, 40, 200]) * US
            if ks < b + 100 * US:
                rows["kernels"].append(kernel(ks, ks + kd, corr=corr, stream=rng.choice([7, 7, 9]),
                                              name=rng.choice(["gemm", "softmax", "ncclDevKernel_AllReduce"])))
            corr += 1
            x += ld + rng.choice([0, 1, 2, 3, 3, 3, 3, 60] if launch_heavy else [0, 1, 3, 40, 150]) * US
        if rng.random() < 0.5:  # a copy and the call that issued it
            c0 = a + rng.randint(0, max(1, (b - a) // US - 60)) * US
            kind, src, dst = rng.choice([("HtoD", "pageable", "device"), ("HtoD", "pinned", "device"),
                                         ("DtoH", "device", "pinned"), ("DtoH", "device", "pageable"), ("memset", None, "device")])
            name = rng.choice(["cudaMemcpyAsync", "cudaMemcpy", "cudaMemsetAsync"])
            is_async = rng.choice([True, False, None])
            rows["runtime_api"].append(api(c0, c0 + rng.randint(3, 40) * US, name=name, corr=corr))
            rows["memcpy"].append(memcpy(c0 + 2 * US, c0 + rng.randint(5, 50) * US, kind=kind, corr=corr, nbytes=rng.choice([None, 1 << 20]),
                                         src_kind=src, dst_kind=dst, is_async=is_async, stream=rng.choice([7, 9])))
            corr += 1
            if kind == "DtoH" and rng.random() < 0.6:
                s0 = c0 + 45 * US
                rows["runtime_api"].append(api(s0, s0 + rng.randint(5, 80) * US, name="cudaStreamSynchronize", is_sync=True))
                rows["spans"].append(span("aten::item", c0 - US, s0 + 90 * US, depth=1))
        if rng.random() < 0.3:
            s0 = a + rng.randint(10, 200) * US
            rows["runtime_api"].append(api(s0, s0 + rng.randint(10, 300) * US, name="cudaDeviceSynchronize", is_sync=True))
        if rng.random() < 0.25:
            s0 = a + rng.randint(10, 200) * US
            rows["runtime_api"].append(api(s0, s0 + rng.randint(5, 200) * US, name=rng.choice(["cudaFree", "cudaMalloc"])))
        if rng.random() < 0.3:
            w0 = a + rng.randint(0, 100) * US
            rows["spans"].append(span(rng.choice(["data.load_batch", "queue.get"]), w0, w0 + rng.randint(20, 600) * US,
                                      depth=1, thread_id=rng.choice([1, 1, 3])))
        if rng.random() < 0.15:
            w0 = a + rng.randint(0, 100) * US
            rows["spans"].append(span("_compile.compile_inner (dynamo_timed)", w0, w0 + rng.randint(20, 600) * US, depth=1))
        if rng.random() < 0.5:
            w0 = a + rng.randint(0, 100) * US
            rows["spans"].append(span(rng.choice(["forward", "augment", "optimizer.step"]), w0, w0 + rng.randint(20, 300) * US, depth=1,
                                      thread_id=rng.choice([1, 2])))
        if first_at is not None and i >= first_at and (i == first_at or once.random() < 0.7):
            w0 = a + once.randint(0, 100) * US
            dur = (once.randint(1000, 4000) if i == first_at else once.randint(5, 40)) * US
            rows["spans"].append(span("metrics.norm", w0, min(w0 + dur, b), depth=1))
        t = b
    end = t
    cpu = {1: 0, 2: 0}
    rq = {1: 0, 2: 0}
    for tid in (1, 2):
        ts = 0
        while ts < end:
            cpu[tid] += rng.randint(0, 400) * US
            rq[tid] += rng.choice([0, 0, 10, 300]) * US
            rows["sched"].append(sched(ts, thread_id=tid, cpu_time_ns=cpu[tid], runqueue_wait_ns=rq[tid]))
            ts += rng.choice([100, 400, 1500]) * US
    if rng.random() < 0.7:
        ts, viol = 0, 0.0
        while ts < end:
            rows["nvml"].append(nvml(ts, "sm_clock_mhz", rng.choice([1980, 1980, 1500, 900])))
            rows["nvml"].append(nvml(ts, "max_sm_clock_mhz", 1980))
            rows["nvml"].append(nvml(ts, "clock_event_reasons", rng.choice([0, 0, 1, 0x4, 0x20])))
            if rng.random() < 0.5:
                viol += rng.choice([0, 0, 200 * US])
                rows["nvml"].append(nvml(ts, "violation_power_ns", viol))
            ts += rng.choice([300, 1000, 5000]) * US
    rows["clock_sync"].append(clock(0, rng.choice([1 * US, 50 * US])))
    drop = {k for k in rows if rng.random() < 0.3} if seed % 4 == 3 else set()  # sources missing in some
    kept = {k: v for k, v in rows.items() if k not in drop}
    return make_incident(steps=st, **kept)
