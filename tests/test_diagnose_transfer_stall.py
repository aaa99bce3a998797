"""transfer_stall on synthetic timelines of known truth: which kind of copy held the critical
path, its bytes and bandwidth against the link, and the fix by kind; gpu_bound counts kernels
only (issue 25)."""

from tests.builders import api, kernel, make_incident, memcpy, step
from workflow_lib.diagnose import DiagnoseOptions, diagnose
from workflow_lib.diagnose.checks.transfer_stall import FIXES
from workflow_lib.core.records import validate

DIGEST = "0" * 64
MS = 1_000_000
US = 1_000


def run(inc):
    rec = diagnose(inc, incident_id="t", snapshot_digest=DIGEST, options=DiagnoseOptions())
    validate(rec, "diagnosis")
    return rec


def finding(rec, check, sid):
    st = next(s for s in rec["steps"] if s["step_id"] == sid)
    return next(f for f in st["findings"] if f["check"] == check)


def trainer(inject: dict[int, str], n=8):
    """Steps of one 9.5 ms kernel launched at the step start (10 ms step), plus per injected
    step one copy of the named kind on the training stream before the kernel."""
    steps, kernels, rt, mc = [], [], [], []
    t, corr = 0, 1
    for i in range(n):
        kind = inject.get(i)
        k0 = t + 10 * US
        if kind == "pageable":  # 64 MiB from pageable memory: the host call blocks for the staged copy
            rt.append(api(t, t + 130 * MS, name="cudaMemcpyAsync", corr=corr))
            mc.append(memcpy(t + 5 * US, t + 130 * MS, kind="HtoD", corr=corr, nbytes=64 << 20, src_kind="pageable",
                             dst_kind="device", is_async=True))
            corr += 1
            k0 = t + 130 * MS + 20 * US
        elif kind == "pack":  # a 5 ms DtoH into a pinned buffer on the training stream
            rt.append(api(t, t + 8 * US, name="cudaMemcpyAsync", corr=corr))
            mc.append(memcpy(t + 10 * US, t + 5 * MS, kind="DtoH", corr=corr, nbytes=128 << 20, src_kind="device",
                             dst_kind="pinned", is_async=True))
            corr += 1
            k0 = t + 5 * MS
        elif kind == "memset":
            rt.append(api(t, t + 3 * MS, name="cudaMemset", corr=corr))
            mc.append(memcpy(t + 10 * US, t + 2_990 * US, kind="memset", corr=corr, nbytes=1 << 30, dst_kind="device",
                             is_async=False))
            corr += 1
            k0 = t + 3 * MS + 10 * US
        rt.append(api(k0 - 8 * US, k0 - 3 * US, corr=corr))
        kernels.append(kernel(k0, k0 + 9_500 * US, corr=corr))
        corr += 1
        end = k0 + 9_500 * US + 490 * US
        if kind == "item":  # loss.item(): DtoH of 4 bytes into pageable memory, then a 6 ms host gap
            rt.append(api(k0, k0 + 9_510 * US, name="cudaMemcpyAsync", corr=corr))
            mc.append(memcpy(k0 + 9_500 * US, k0 + 9_505 * US, kind="DtoH", corr=corr, nbytes=4, src_kind="device",
                             dst_kind="pageable", is_async=True))
            rt.append(api(k0 + 9_510 * US, k0 + 9_512 * US, name="cudaStreamSynchronize", is_sync=True))
            corr += 1
            end += 6 * MS
        steps.append(step(i, t, end))
        t = end
    return make_incident(steps=steps, kernels=kernels, runtime_api=rt, memcpy=mc)


def test_pageable_htod_is_transfer_stall_not_gpu_bound():
    rec = run(trainer({4: "pageable"}))
    f = finding(rec, "transfer_stall", 4)
    assert f["verdict"] == "attributed" and f["explains_ns"] >= 129 * MS
    b = f["evidence"]["by_kind"]["pageable"]
    assert b["bytes"] == 64 << 20 and b["fix"] == FIXES["pageable"] and "pin_memory=True" in b["fix"]
    assert b["link_nominal_gbps"] == 64.0 and b["bandwidth_gbps"] < 1.0 and b["at_link_ns"] < 2 * MS
    # Copy-engine time is not compute: 9.5 ms of kernels in a 140 ms step is not GPU-bound.
    assert finding(rec, "gpu_bound", 4)["verdict"] == "not_applicable"
    assert finding(rec, "gpu_bound", 3)["verdict"] == "attributed"
    assert rec["steps"][4]["excess"]["by_cause"].get("transfer_stall", 0) >= 0.95 * rec["steps"][4]["excess"]["excess_ns"]
    top = rec["next_experiments"][0]
    assert top["check"] == "transfer_stall" and top["candidate_change"] == FIXES["pageable"]


def test_item_every_k_steps_is_a_synchronous_dtoh():
    rec = run(trainer({3: "item", 6: "item"}))
    for sid in (3, 6):
        f = finding(rec, "transfer_stall", sid)
        assert f["verdict"] == "attributed" and f["evidence"]["dominant_kind"] == "sync_dtoh"
        assert ".item()" in f["evidence"]["by_kind"]["sync_dtoh"]["fix"]
        x = rec["steps"][sid]["excess"]
        assert x["by_cause"].get("transfer_stall", 0) >= 0.9 * x["excess_ns"]
    for sid in (2, 4, 5, 7):
        assert finding(rec, "transfer_stall", sid)["verdict"] == "not_applicable"


def test_dtoh_pack_on_the_training_stream_names_a_side_stream():
    rec = run(trainer({5: "pack"}))
    f = finding(rec, "transfer_stall", 5)
    assert f["verdict"] == "attributed" and f["evidence"]["gpu_compute_waited_ns"] >= 4_900 * US
    assert f["evidence"]["dominant_kind"] == "dtoh_pack" and "side stream" in f["evidence"]["by_kind"]["dtoh_pack"]["fix"]
    assert f["evidence"]["by_kind"]["dtoh_pack"]["streams"] == [7]  # the training stream
    assert f["evidence"]["host_blocked_idle_ns"] == 0


def test_synchronous_memset():
    f = finding(run(trainer({2: "memset"})), "transfer_stall", 2)
    assert f["verdict"] == "attributed" and f["evidence"]["dominant_kind"] == "sync_memset"


def test_copy_beside_kernels_on_a_side_stream_is_not_on_the_critical_path():
    inc = make_incident(steps=[step(0, 0, 10 * MS)], kernels=[kernel(0, 10 * MS, corr=1)],
                        runtime_api=[api(0, 5 * US, corr=1), api(10 * US, 20 * US, name="cudaMemcpyAsync", corr=2)],
                        memcpy=[memcpy(1 * MS, 4 * MS, kind="HtoD", stream=9, corr=2, nbytes=64 << 20, src_kind="pinned",
                                       dst_kind="device", is_async=True)])
    f = finding(run(inc), "transfer_stall", 0)
    assert f["verdict"] == "not_applicable" and f["evidence"]["gpu_compute_waited_ns"] == 0


def test_copies_without_memory_kinds_are_plain_copies():
    inc = make_incident(steps=[step(0, 0, 10 * MS)], kernels=[kernel(5 * MS, 10 * MS, corr=1)],
                        runtime_api=[api(0, 5 * US, corr=2), api(4_990 * US, 4_995 * US, corr=1)],
                        memcpy=[memcpy(10 * US, 5 * MS, kind="HtoD", corr=2, nbytes=200_000_000)])
    f = finding(run(inc), "transfer_stall", 0)
    # 40 GB/s: a pinned rate, so no guess (a slow one is "pageable, probably": test_diagnose_consequence.py)
    assert f["verdict"] == "attributed" and f["evidence"]["dominant_kind"] == "copy"


def test_copy_launched_by_a_graph_does_not_hold_the_host():
    # A pinned HtoD inside a CUDA graph: the cudaGraphLaunch call is async; only the copy's own
    # compute-free time is on the critical path, not the host call.
    inc = make_incident(steps=[step(0, 0, 10 * MS)], kernels=[kernel(3 * MS, 10 * MS, corr=1)],
                        runtime_api=[api(0, 2 * MS, name="cudaGraphLaunch", corr=1)],
                        memcpy=[memcpy(2_500 * US, 3 * MS, kind="HtoD", corr=1, nbytes=1 << 20, src_kind="pinned",
                                       dst_kind="device", is_async=True)])
    f = finding(run(inc), "transfer_stall", 0)
    assert f["evidence"]["host_blocked_idle_ns"] == 0 and f["evidence"]["gpu_compute_waited_ns"] == 500 * US


def test_prefetch_copy_during_a_loader_wait_stays_the_waits():
    # The pin-memory thread's HtoD of the next batch on a side stream while the main thread
    # waits 6 ms in dataloader.next: nothing waited for the copy; the idle is the loader's.
    from tests.builders import span

    inc = make_incident(
        steps=[step(0, 0, 10 * MS)],
        kernels=[kernel(0, 2 * MS, corr=1), kernel(8_100 * US, 10 * MS, corr=3)],
        runtime_api=[api(0, 5 * US, corr=1), api(3 * MS, 3_010 * US, name="cudaMemcpyAsync", corr=2, thread_id=2),
                     api(8_090 * US, 8_095 * US, corr=3)],
        memcpy=[memcpy(3_020 * US, 5 * MS, kind="HtoD", stream=11, corr=2, nbytes=64 << 20, src_kind="pinned",
                       dst_kind="device", is_async=True)],
        spans=[span("dataloader.next", 2 * MS, 8 * MS)])
    rec = run(inc)
    assert finding(rec, "transfer_stall", 0)["verdict"] == "not_applicable"
    # The GPU idle of the wait (the copy's own 1.98 ms is GPU activity, gpu_work's).
    assert finding(rec, "input_starvation", 0)["explains_ns"] == 6 * MS - 1_980 * US


def _reads_in_ops(n=20, op_name="aten::item"):
    """One 9.5 ms kernel, then a user span `metrics` of n reads, each `aten::select` (20 us), 10 us
    of Python, then the read's op `op_name` (100 us: 40 us of host before its cudaMemcpyAsync DtoH
    of 4 B into pinned staging, the 10 us call, a 10 us cudaStreamSynchronize, 40 us after), then
    30 us of Python. Returns (incident, [op start], [next select start or step end])."""
    from tests.builders import span

    rt, mc, spans = [api(0, 5 * US, corr=1)], [], []
    t = 9_600 * US
    start = t
    ops, nxt = [], []
    for k in range(n):
        spans.append(span("aten::select", t, t + 20 * US, depth=1))
        a = t + 30 * US
        spans.append(span(op_name, a, a + 100 * US, depth=1))
        rt.append(api(a + 40 * US, a + 50 * US, name="cudaMemcpyAsync", corr=10 + k))
        mc.append(memcpy(a + 42 * US, a + 47 * US, kind="DtoH", corr=10 + k, nbytes=4, src_kind="device", dst_kind="pinned",
                         is_async=True))
        rt.append(api(a + 50 * US, a + 60 * US, name="cudaStreamSynchronize", is_sync=True))
        ops.append(a)
        t = a + 130 * US
        nxt.append(t)
    spans.append(span("metrics", start, t, depth=0))
    inc = make_incident(steps=[step(0, 0, t)], kernels=[kernel(10 * US, 9_510 * US, corr=1)], runtime_api=rt,
                        memcpy=mc, spans=spans)
    return inc, ops, nxt


def test_a_read_owns_its_op_span_not_the_loop_around_it():
    # Under torch.profiler each .item() is an aten::item span around the copy and its sync: the
    # op's host time before the copy call is the read's (it goes with the read). The select
    # between reads and the user's span around them all stay named host work.
    inc, ops, nxt = _reads_in_ops()
    rec = run(inc)
    f = finding(rec, "transfer_stall", 0)
    assert f["evidence"]["dominant_kind"] == "sync_dtoh"
    # Per read: op start to the next select (100 us op + 30 us Python after it): 130 us; the 20
    # selects and the 10 us after each (30 us a read) are not the read's.
    assert f["explains_ns"] == sum(b - a for a, b in zip(ops, nxt)) == 20 * 130 * US
    assert f["evidence"]["by_kind"]["sync_dtoh"]["critical_ns"] == 20 * 130 * US


def test_a_span_around_several_reads_or_a_launch_is_not_a_read_op():
    # The same reads with the op spans each around two reads (a user's helper reading two values):
    # no span holds one read alone, so only the calls and the idle after them are the reads'.
    inc, ops, nxt = _reads_in_ops()
    one = run(inc)
    from tests.builders import span

    spans = [s for s in inc.table("spans").to_pylist() if s["name"] != "aten::item"]
    spans += [span("read_two", ops[k], ops[k + 1] + 100 * US, depth=1) for k in range(0, 20, 2)]
    two = make_incident(steps=inc.table("steps").to_pylist(), kernels=inc.table("kernels").to_pylist(),
                        runtime_api=inc.table("runtime_api").to_pylist(), memcpy=inc.table("memcpy").to_pylist(),
                        spans=spans)
    f = finding(run(two), "transfer_stall", 0)
    # From each copy call to the next span start (90 us), for all 20 reads.
    assert f["explains_ns"] == 20 * 90 * US < finding(one, "transfer_stall", 0)["explains_ns"]
