"""Held time (issue 34, diagnose/held.py): known-truth incidents, both directions.

A trainer that waits on the GPU every step (an `.item()`: a 4-byte DtoH copy and the sync the
host waits in) launches five 150 us kernels per 1 ms step on one stream. On step 6 another
process holds the GPU for HELD_US: the third kernel, launched and with its stream empty, starts
HELD_US late and the step is that much longer. The rule credits that time to kernel_slowdown,
ahead of the sync and the copy, where the record is complete; where it is not (a launch
without its kernel record, a runtime record of launch calls only, records the capture counted
as lost, a stream whose records overlap), the same time is not the other process's and keeps
the idle-time checks' answer. Normal steps are untouched either way. Every diagnosis here is
made on both paths and compared (the per-step reference, tests/diagnose_crosscheck.py).
"""

from __future__ import annotations

import numpy as np

from tests.builders import api, clock, kernel, make_incident, memcpy, nvml, step
from tests.diagnose_crosscheck import crosschecked
from workflow_lib.core.records import validate
from workflow_lib.diagnose import diagnose as _diagnose
from workflow_lib.diagnose import evidence, held

US = 1_000
HELD_US = 400
STEP_US = 2_000
diagnose = crosschecked(_diagnose)


def _trainer(held_at=(6,), drop_kernel_at=(), launches_only=False, stream_of=lambda s, j: 7, with_nvml=True):
    """10 steps; `held_at`: steps whose third kernel waits HELD_US with the GPU held elsewhere."""
    steps, kernels, copies, calls, samples = [], [], [], [], []
    corr = 0
    for s in range(10):
        lo = s * STEP_US * US
        t = lo + 20 * US
        prev_end = 0
        for j in range(5):
            corr += 1
            calls.append(api(t, t + 10 * US, corr=corr))
            start = max(t + 15 * US, prev_end + 2 * US) + (HELD_US * US if s in held_at and j == 2 else 0)
            if not (s in drop_kernel_at and j == 4):
                kernels.append(kernel(start, start + 150 * US, corr=corr, stream=stream_of(s, j)))
            prev_end = start + 150 * US
            t += 30 * US
        corr += 1  # the .item(): its copy, then the sync the host waits in until the copy is done
        calls.append(api(t, t + 8 * US, name="cudaMemcpyAsync", corr=corr))
        c0 = prev_end + 2 * US
        copies.append(memcpy(c0, c0 + 2 * US, kind="DtoH", corr=corr, nbytes=4, src_kind="device", dst_kind="pinned",
                             is_async=True))
        if not launches_only:
            calls.append(api(t + 8 * US, c0 + 7 * US, name="cudaStreamSynchronize", is_sync=True))
        end = c0 + 30 * US
        steps.append(step(s, lo, end))
        samples.append(nvml(lo + 100 * US, "sm_clock_mhz", 1980))
    extra = {"nvml": samples} if with_nvml else {}
    return make_incident(steps=steps, kernels=kernels, memcpy=copies, runtime_api=calls, clock_sync=[clock(0, 1 * US)],
                         **extra)


def _run(inc):
    rec = diagnose(inc, incident_id="t", snapshot_digest="0" * 64)
    validate(rec, "diagnosis")
    return {s["step_id"]: s for s in rec["steps"]}


def _f(steps, sid, check="kernel_slowdown"):
    return next(f for f in steps[sid]["findings"] if f["check"] == check)


def _waited(steps, sid):
    """What the idle-time checks of a host wait credit: the `.item()` (transfer_stall) and syncs."""
    return _f(steps, sid, "transfer_stall")["explains_ns"] + _f(steps, sid, "sync_stall")["explains_ns"]


def _normal(steps):
    return {sid: [(f["check"], f["verdict"], f["explains_ns"]) for f in s["findings"]] for sid, s in steps.items() if sid != 6}


def test_held_time_is_the_other_process_where_the_record_is_complete():
    steps = _run(_trainer())
    f = _f(steps, 6)
    assert f["verdict"] == "attributed", f["evidence"]
    # The 400 us the third kernel waited, nothing else: its kernels ran their usual 150 us.
    assert abs(f["explains_ns"] - HELD_US * US) <= 2 * US, f["explains_ns"]
    ev = f["evidence"]
    assert ev["held"]["ns"] == f["explains_ns"] and ev["slower_kernels"] == 0
    assert "6 launch calls in the step, each with its GPU record" in ev["held"]["record_complete"]
    assert "another process" in ev["why"]["held_by"] and "per-process lists are not recorded" in ev["why"]["held_by"]
    assert "nvidia-smi --query-compute-apps" in ev["held"]["fix"]
    # Credited ahead of the `.item()` the host sat in meanwhile: its wait did not idle the GPU.
    assert _waited(steps, 6) <= _waited(steps, 5) + 2 * US
    assert steps[6]["excess"]["by_cause"].get("kernel_slowdown", 0) >= 0.8 * steps[6]["excess"]["excess_ns"]


def test_without_nvml_who_held_it_is_not_known_either():
    f = _f(_run(_trainer(with_nvml=False)), 6)
    assert f["verdict"] == "attributed" and "no NVML samples" in f["evidence"]["why"]["held_by"]


def test_normal_steps_are_untouched():
    """The same trainer with nothing held: every normal step reads the same with or without step 6's hold."""
    base, held_run = _run(_trainer(held_at=())), _run(_trainer())
    assert all(_f(base, s)["verdict"] == "not_applicable" for s in base)
    assert _normal(held_run) == _normal(base)
    assert "held" not in _f(base, 6)["evidence"]


def _not_credited(inc):
    steps = _run(inc)
    assert _f(steps, 6)["verdict"] == "not_applicable", _f(steps, 6)["evidence"]
    assert "held" not in _f(steps, 6)["evidence"]
    # The time stays with what reads idle GPU time behind a host wait: the `.item()` it waited in.
    assert _waited(steps, 6) >= _waited(steps, 5) + 0.8 * HELD_US * US
    return steps


def test_not_credited_when_a_launch_has_no_kernel_record():
    _not_credited(_trainer(drop_kernel_at=(6,)))  # the step's fifth kernel dropped: its work ran unseen


def test_not_credited_when_the_capture_counted_lost_records():
    inc = _trainer()
    inc.manifest["sources"]["cupti"] = {"status": "observed", "reason": None,
                                        "detail": {"kernels_overwritten": 12, "raw_buffers_unread": 0, "error_count": 0}}
    _not_credited(inc)


def test_not_credited_when_streams_lose_their_order():
    # Step 3's kernels recorded on one stream but run as if on two: two of them overlap by 100 us.
    inc = _trainer()
    k = inc.tables["kernels"].to_pylist()
    k[16]["start_ns"] -= 100 * US
    k[16]["end_ns"] -= 100 * US
    from tests.builders import table

    inc.tables["kernels"] = table("kernels", sorted(k, key=lambda r: r["start_ns"]))
    _not_credited(inc)


def test_not_credited_on_a_record_of_launch_calls_only():
    """HTA's sampled traces keep launch calls only: work dropped with its launches reads as held."""
    steps = _run(_trainer(launches_only=True))
    f = _f(steps, 6)
    assert f["verdict"] == "not_applicable" and "held" not in f["evidence"]


def test_a_repeated_correlation_id_does_not_join_an_earlier_session():
    """CUPTI detached and attached again restarts its ids: a kernel whose own launch was not
    recorded is not joined to an earlier session's call with the same id."""
    from types import SimpleNamespace

    rt_corr = np.array([5, 6, 7, 1, 2, 3], np.int64)  # a restart after 7
    order = np.argsort(rt_corr, kind="stable")
    ev = SimpleNamespace(rt_corr=rt_corr, cupti_reattached=True, rt_corr_order=order, rt_corr_sorted=rt_corr[order],
                         rt_start=np.array([0, 10, 20, 100, 110, 120], np.int64))
    rows, ok = evidence.launch_rows_at(ev, np.array([6, 2, 5], np.int64), np.array([15, 115, 130], np.int64))
    assert ok.tolist() == [True, True, False]  # id 5 after the restart: its call is the first session's
    assert rows[:2].tolist() == [1, 4]
    assert evidence.cupti_sessions(rt_corr).tolist() == [0, 0, 0, 1, 1, 1]


def _rank_held(inc):
    import re

    from workflow_lib.diagnose import evidence

    ev = evidence.build(inc, -1 if inc.table("steps")["rank"].null_count else 0, 0, re.compile("$^"))
    return held.of_rank(ev, evidence.sources_of(inc))


def test_the_reasons_a_record_is_not_read_are_named():
    assert held.LAUNCHES_ONLY in _rank_held(_trainer(launches_only=True)).rank_gaps
    lost = _trainer()
    lost.manifest["sources"]["cupti"] = {"status": "observed", "reason": None, "detail": {"kernels_overwritten": 12}}
    assert _rank_held(lost).rank_gaps == ("kernels: 12 records overwritten in the capture's ring",)
    assert _rank_held(_trainer()).rank_gaps == ()


def test_hta_sampled_trace_looks_held_and_is_not_read(tmp_path):
    """HTA's sampled real trace (tests/fixtures/real_traces): kernels launched up to 67 ms ahead
    start after an idle GPU because the work between them was sampled out with its launches.
    That reads as 394 ms held (a third of a step), and the record of launch calls only says why
    it is not read: no step is kernel_slowdown's."""
    from pathlib import Path

    from workflow_lib.core.incident import read_incident
    from workflow_lib.importers.kineto import import_kineto

    trace = Path(__file__).parent / "fixtures" / "real_traces" / "hta_trace_filter_sampled_rank-0.json.gz"
    inc = read_incident(import_kineto([trace], incident_id="s", incidents_dir=tmp_path))
    h = _rank_held(inc)
    assert h.time.total_ns > 300_000_000 and h.rank_gaps == (held.LAUNCHES_ONLY,)
    for s in diagnose(inc, incident_id="t", snapshot_digest="0" * 64)["steps"]:
        assert next(f for f in s["findings"] if f["check"] == "kernel_slowdown")["verdict"] != "attributed"
