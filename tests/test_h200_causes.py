"""Issue 34's H200 captures (tests/fixtures/h200_causes/, PROVENANCE.md there): programs written
as users write them (examples/gpu/causes/, no stallcase import), each in recorder form
(`stallcase record -- python3 PROG`) and Kineto form (the same program under torch.profiler),
with causes injected on steps known from the programs' own arguments (truth.json), never from
markers in them. The GC and checkpoint programs' recorder form is tests/fixtures/h200_unchanged/.

Per fixture, on the diagnosis run here (CPU):
- every injected step whose excess over the typical step (the median wall of the fixture's
  normal steps) is at least MIN_EXCESS of that median is explained by the expected cause for
  >= 80% of its excess (a smaller excess is within the normal steps' spread: measuring 80% of
  it measures noise); truth.json's `with` counts the part of the injection another check names
  by its documented rule (a `.item()`'s wait: transfer_stall's sync_dtoh);
- no false attribution on normal steps: no check other than the ones that describe what a
  typical step is made of (COMPOSITION: its GPU work, its host work and submission, warm-up)
  claims more than 20% of a normal step's wall. Those describe the step's own cost, not a stall;
  any other check claiming a fifth of a step where nothing was injected names a cause that is
  not there, unless it is a run-queue wait the capture measured on a step that itself stood out,
  significant against a typical step's wait and as large as half the step's excess (a real stall
  nobody injected: _measured_wait).
In recorder form, CUPTI records only inside the triggered GPU windows: a window opens after the
latency trigger fires on the first slow steps, so those steps have no kernel or copy evidence.
They are held to the other half of the rule: the expected cause is not attributed there without
its evidence (it stays unresolved, saying what is missing) and no other stall claims them.
The cases the engine still gets wrong are strict xfails, each with its measured reason.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from workflow_lib.core.cas import hash_file
from workflow_lib.diagnose import diagnose_dir
from workflow_lib.importers.kineto import import_kineto

FIX = Path(__file__).parent / "fixtures" / "h200_causes"
TRUTH = json.loads((FIX / "truth.json").read_text())["fixtures"]
PROGRAMS = Path(__file__).parents[1] / "examples" / "gpu" / "causes"
MIN_EXCESS = 0.10
SHARE = 0.80
FALSE_SHARE = 0.20
WAIT_OVER_TYPICAL = 10
COMPOSITION = {"gpu_work", "gpu_bound", "host_work", "host_submission", "warm_up"}
# Cases the engine gets wrong, measured (docs/diagnosis.md): strict, so a fix shows as a failure to unmark.
XFAIL_EXPLAINED = {
    "sync_layers.kineto": "steps 41-45 pass (0.88, 0.86, 0.80, 0.91, 0.85) since a step after a step with syncs is owed "
                          "the lead the host had built (diagnose/lead.py: sync-free steps start 7.2 ms ahead, median; "
                          "41-45 start 1.4-1.7 ms ahead); step 40, the run's first, 0.68 (0.28 before first_call): of "
                          "its 48.6 ms excess, first_call names the first linalg_vector_norm's one-time host cost "
                          "(30.8 ms against a 0.027 ms median over its 190 later calls; 30.7 ms of GPU idle, counted "
                          "through truth.json's with), sync_stall 1.6 ms and the reads' sync_dtoh 0.8 ms; the rest is "
                          "GPU busy time, 25.6 ms against 13.6 ms on a normal step and ~15 ms on steps 41-45 (its "
                          "first sync waited for step 39's queued work, the ~7 ms lead a sync-free step hands on), "
                          "which no rule that credits a sync or a host cost with the GPU's idle can take, host "
                          "submission 2.3 ms, and the first .item()'s cudaHostAlloc 1.1 ms (allocator_churn's). "
                          "Tried 2026-12-05: crediting a sync with the lead its step drained (lead at the step's "
                          "start less at its end, taken from the GPU time its syncs waited on) gives step 40 10.5 ms "
                          "more (0.90), but that time is step 39's queued work on a busy GPU, which a GPU-bound run "
                          "does not lose to the sync (the issue's rule: a sync owns the idle it causes), and the same "
                          "rule hands sync_stall 5.4 ms of normal step 49 (the closing cudaDeviceSynchronize) and "
                          "1.9 ms of contended.recorder's step 57 (an .item() behind the slowed gemm): not kept",
    # The recapture of 2026-12-04 (the trainer waits on the GPU every step; PROVENANCE.md). Its Kineto
    # form passes since held time (diagnose/held.py) is kernel_slowdown's: every counted step, 1.45-4.29x
    # of its excess (the held time itself, 2.7-6.1 ms a step, outgrows the excess over a 6.84 ms median).
    "contended.recorder": "13 steps in GPU windows (45-57, 3.5-6.0 ms over a 4.26 ms median): with held time "
                          "(2.0-4.8 ms a step; 0 on normal steps) and each slowed kernel's extra claimed in whichever "
                          "step it falls (a kernel slowed past its step's end spills into the next), 12 of 13 reach "
                          "80% (45-56: 0.82-1.24; 54 0.82 with host_submission 0.81 ms); 57 0.27: its .item() sync "
                          "waited 1.96 ms, 0.66 ms of it for the tail of step 56's slowed nvjet gemm (2.20 ms "
                          "against a 0.094 ms median over its 230 launches; its extra inside step 57, 0.95 ms, is kernel_slowdown's) and 1.30 ms "
                          "for the normal-length work queued behind it, run that much later: the read's wait, "
                          "transfer_stall's sync_dtoh (2.01 ms) by the documented rule; no check credits a kernel "
                          "with the delay of the work queued behind it",
}
XFAIL_FALSE: dict[str, str] = {}
_CACHE: dict = {}


def _params(xfails: dict[str, str], names=None):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=xfails[n])) if n in xfails else n
            for n in sorted(TRUTH if names is None else names)]


def _gpu_covered(inc: Path) -> set[int]:
    """Steps lying wholly inside a GPU window: the capture's own list (manifest, sources.cupti)."""
    spans = json.loads((inc / "manifest.json").read_text())["sources"]["cupti"]["detail"]["steps"]["with_gpu_activity"]
    return {i for a, b in spans for i in range(a, b + 1)}


def _incident(name: str, tmp: Path) -> Path:
    t = TRUTH[name]
    if "trace" in t:
        import_kineto([str(FIX / t["trace"])], incident_id=name, incidents_dir=tmp)
        return tmp / name
    src = (FIX / t["incident"]).resolve()
    if not t.get("drop_copy_kinds"):
        return src
    # The same capture without copy kinds: memcpy's memory kinds (pageable/pinned/device) and
    # async flag nulled, as a capture that did not record them has them; bytes, times, streams kept.
    dst = tmp / name
    shutil.copytree(src, dst)
    path = dst / "tables" / "memcpy.parquet"
    tab = pq.read_table(path)
    for col in ("src_kind", "dst_kind", "is_async"):
        i = tab.schema.get_field_index(col)
        tab = tab.set_column(i, tab.schema.field(i), pa_nulls(tab.schema.field(i).type, tab.num_rows))
    pq.write_table(tab, path)
    mpath = dst / "manifest.json"
    m = json.loads(mpath.read_text())
    m["tables"]["memcpy"]["digest"] = hash_file(path)  # the derived table is this fixture's own
    mpath.write_text(json.dumps(m))
    return dst


def pa_nulls(typ, n):
    import pyarrow as pa

    return pa.nulls(n, type=typ)


def _hog_steps(inc: Path, log: Path) -> list[int]:
    """Steps that ran while the other process ran: the step's host interval overlaps the
    launcher's log's wall-clock interval of matmul_hog.py. The trainer waits on the GPU every
    step (`.item()` of its loss), so a step's GPU work lies inside its host interval: a step
    the interval overlaps shared the GPU, even where its kernels started only after the hog's
    last matmul ended (they waited in the queue behind it: the recorder form's step 57)."""
    clock = json.loads((inc / "manifest.json").read_text())["clock"]
    h0, h1 = (float(x) for x in re.search(r"start ([0-9.]+) end ([0-9.]+)", log.read_text()).groups())
    off = int(clock.get("unix_minus_host_ns") or 0)
    a, b = int(h0 * 1e9) - off, int(h1 * 1e9) - off
    st = pq.read_table(inc / "tables" / "steps.parquet", columns=["step_id", "start_ns", "end_ns"]).to_pandas()
    return [int(s.step_id) for s in st.itertuples() if s.end_ns > a and s.start_ns < b]


def case(name: str, tmp_path_factory) -> dict:
    if name not in _CACHE:
        t = TRUTH[name]
        inc = _incident(name, tmp_path_factory.mktemp(name.replace(".", "_")))
        if t["injected"] == "hog":
            injected = set(_hog_steps(inc, FIX / t["hog_log"]))
        else:
            injected = {i for a, b in t["injected"] for i in range(a, b + 1)}
        d = diagnose_dir(inc)
        steps = [s for s in d["steps"] if s["step_id"] > 0]
        normal = [s for s in steps if s["step_id"] not in injected]
        covered = {s["step_id"] for s in steps} if "trace" in t else _gpu_covered(inc)
        _CACHE[name] = {"steps": steps, "injected": injected, "normal": normal, "covered": covered,
                        "median": float(np.median([s["wall_ns"] for s in normal])), "cause": t["cause"],
                        "with": t.get("with", {})}
    return _CACHE[name]


def _explains(s: dict, check: str, with_: dict | None = None) -> int:
    """The cause's credited ns, plus, for each (check, kind) in `with_` (truth.json: a part of the
    injection another check names by its documented rule), that check's credit up to its kind's
    critical time (a kind: transfer_stall's copy kind in its evidence's by_kind, first_call's
    op name in its by_name)."""
    out = 0
    for f in s["findings"]:
        if f["verdict"] != "attributed":
            continue
        if f["check"] == check:
            out += int(f["explains_ns"] or 0)
        elif f["check"] in (with_ or {}):
            ev = f["evidence"] or {}
            kind = (ev.get("by_kind") or ev.get("by_name") or {}).get(with_[f["check"]]) or {}
            out += min(int(f["explains_ns"] or 0), int(kind.get("critical_ns") or 0))
    return out


def test_programs_are_unchanged_user_code():
    for p in PROGRAMS.glob("*.py"):
        if p.name != "kineto_run.py":  # the profiler runner is the user's tool, not the program
            assert "stallcase" not in p.read_text(), p


def test_fixtures_are_small_and_cover_every_program():
    for p in FIX.rglob("*"):
        if p.is_file():
            assert p.stat().st_size <= 2 * 1024 * 1024, p
    assert {n.split(".")[0] for n in TRUTH} == {"sync_layers", "pageable_copy", "python_loop", "contended",
                                               "gc_heavy", "checkpoint_every_n"}


@pytest.mark.parametrize("name", _params(XFAIL_EXPLAINED))
def test_injected_steps_explained_by_their_cause(name, tmp_path_factory):
    c = case(name, tmp_path_factory)
    counted = [s for s in c["steps"] if s["step_id"] in c["injected"] and s["step_id"] in c["covered"]
               and s["wall_ns"] - c["median"] >= MIN_EXCESS * c["median"]]
    assert counted, f"{name}: no injected step with GPU evidence stands out of the normal steps"
    short = {s["step_id"]: round(_explains(s, c["cause"], c["with"]) / (s["wall_ns"] - c["median"]), 2) for s in counted
             if _explains(s, c["cause"], c["with"]) < SHARE * (s["wall_ns"] - c["median"])}
    assert not short, f"{name}: {c['cause']} explains under {SHARE:.0%} of the excess on steps {short}"


def _measured_wait(s: dict, f: dict, c: dict, waits: np.ndarray) -> bool:
    """A normal-schedule step's cpu_contention is a real stall, not a false attribution, when the
    step itself stands out (excess >= MIN_EXCESS of the median) and its measured run-queue wait
    is significant against what a typical step waits (>= WAIT_OVER_TYPICAL x the normal steps'
    90th percentile) and explains at least half of the step's excess: nothing was injected
    there, but the thread measurably waited for a CPU for about as long as the step ran over."""
    if f["check"] != "cpu_contention":
        return False
    excess = s["wall_ns"] - c["median"]
    wait = int((f["evidence"] or {}).get("runqueue_wait_ns") or 0)
    return (excess >= MIN_EXCESS * c["median"] and wait >= WAIT_OVER_TYPICAL * float(np.percentile(waits, 90))
            and wait >= 0.5 * excess)


@pytest.mark.parametrize("name", _params(XFAIL_FALSE))
def test_no_false_attribution_on_normal_steps(name, tmp_path_factory):
    c = case(name, tmp_path_factory)
    waits = np.array([int((f["evidence"] or {}).get("runqueue_wait_ns") or 0) for s in c["normal"] for f in s["findings"]
                      if f["check"] == "cpu_contention"] or [0])
    bad = {}
    for s in c["normal"]:
        for f in s["findings"]:
            if (f["verdict"] == "attributed" and f["check"] not in COMPOSITION
                    and (f["explains_ns"] or 0) > FALSE_SHARE * s["wall_ns"] and not _measured_wait(s, f, c, waits)):
                bad.setdefault(f["check"], []).append(s["step_id"])
    assert not bad, f"{name}: on normal steps {bad}"


def test_a_real_run_queue_wait_on_a_normal_step_is_told_from_a_false_one(tmp_path_factory):
    """The rule above, both ways, on gc_heavy's recorder form: its four slow normal-schedule steps
    (154, 158, 161, 167: 1.3-2.4 ms over a 1.97 ms median) waited 0.86-2.26 ms for a CPU where the
    typical step waits ~0 (90th percentile 6 us): real. The same claim on a step that did not
    stand out, or with a wait no larger than a typical step's, would be false."""
    c = case("gc_heavy.recorder", tmp_path_factory)
    waits = np.array([int((f["evidence"] or {}).get("runqueue_wait_ns") or 0) for s in c["normal"] for f in s["findings"]
                      if f["check"] == "cpu_contention"])
    real = {s["step_id"] for s in c["normal"] for f in s["findings"]
            if f["verdict"] == "attributed" and f["explains_ns"] > FALSE_SHARE * s["wall_ns"] and _measured_wait(s, f, c, waits)}
    assert real == {154, 158, 161, 167}
    s = next(s for s in c["normal"] if s["step_id"] == 158)
    f = next(f for f in s["findings"] if f["check"] == "cpu_contention")
    assert not _measured_wait({**s, "wall_ns": int(c["median"])}, f, c, waits)  # the step did not stand out
    small = {**f, "evidence": {**f["evidence"], "runqueue_wait_ns": int(np.percentile(waits, 90))}}
    assert not _measured_wait(s, small, c, waits)  # a typical step's wait


RECORDER = sorted(n for n, t in TRUTH.items() if "incident" in t)


@pytest.mark.parametrize("name", RECORDER)
def test_injected_steps_without_gpu_evidence_are_not_misattributed(name, tmp_path_factory):
    """Recorder form: an injected step before its GPU window opened has no kernel or copy record.
    A cause that needs them is not attributed there, and no other stall claims the step."""
    c = case(name, tmp_path_factory)
    blind = [s for s in c["steps"] if s["step_id"] in c["injected"] and s["step_id"] not in c["covered"]]
    needs_gpu = c["cause"] in {"sync_stall", "transfer_stall", "launch_bound", "kernel_slowdown"}
    for s in blind:
        for f in s["findings"]:
            if f["verdict"] != "attributed" or f["check"] in COMPOSITION:
                continue
            if f["check"] == c["cause"] and not needs_gpu:
                continue  # a host-evidence cause (GC, checkpoint) needs no GPU window
            assert (f["explains_ns"] or 0) <= FALSE_SHARE * s["wall_ns"], (name, s["step_id"], f["check"], f["explains_ns"])


KINETO = sorted(n for n, t in TRUTH.items() if "trace" in t)


@pytest.mark.parametrize("name", KINETO)
def test_kineto_forms_diagnose_the_same_both_ways(name, tmp_path):
    """The imported traces (tests/test_diagnose_batch.py covers the incident directories): the
    batched engine gives what the per-step reference gives, the step's syncs' shared lead and
    the saves inferred from storage copies included."""
    from tests import reference_diagnosis
    from tests.diagnose_crosscheck import assert_same
    from workflow_lib.core.incident import read_incident
    from workflow_lib.diagnose import diagnose

    inc = read_incident(_incident(name, tmp_path))
    assert_same(reference_diagnosis.diagnose(inc, incident_id="x", snapshot_digest="0" * 64),
                diagnose(inc, incident_id="x", snapshot_digest="0" * 64))
