"""Recorder overhead in one warm process: recorder-on and recorder-off windows of K steps, paired.

    python benchmarks/overhead_inprocess.py [--modes all|parts|m1,m2] [--pairs 30] [--k 10] [--loop auto|transformer|cpu]
        [--budget-s 40] [--json summary.json] [--raw raw.json]

Why in-process: a process per run spreads ±10% on the H200 transformer loop (issue 28), so
a 1% effect is not resolvable that way. Here one process per mode builds the loop, warms it
up, constructs and starts the recorder (timed: the start-up and teardown cost, which only
whole-process trials see otherwise, are reported beside), then runs `--pairs` pairs of
windows. `--startup-pairs` adds the process-level view of start-up and teardown: paired
child processes with and without the recorder (import, start, stop), timed whole.
A pair is one recorder-on and one recorder-off window of K steps in random order (AB or BA,
seeded); off is `FlightRecorder.pause()` (threads alive, nothing recorded), on is
`resume()`. A pair's value is log(mean(on step) / mean(off step)), and the overhead is the
Hodges-Lehmann estimate with the signed-rank 95% interval over pairs (workflow_lib/compare/stats.py,
the trials' own statistics), reported as percent (exp(x) - 1). Every step is timed whole (`with rec.step`, the body and a
device sync); switches happen between windows. Ending an on-window flushes CUPTI (so its
records are parsed then, not inside a later off-window) or stops the profiler (its trace
processing): that time is reported and, in `overhead_pct_with_close`, charged to the window
(an upper bound: in a run, buffers are parsed on CUPTI's thread while the GPU works).

Modes (one process each: CUPTI allows one activity subscriber, so CUPTI and torch.profiler
never share a process):
  aa              A/A: the default recorder on in both windows of a pair (labels only): the
                  design's own noise, an interval around 0 whose width is what it can resolve;
  default         `FlightRecorder()` as a program gets it: host spans/steps, NVML, sched, and
                  where a GPU and CUPTI are present, GPU evidence in windows (capture/gpu_arming.py:
                  baseline windows and the recorder's own latency trigger; their cost is in it);
  no_gpu          the always-on layer alone (host, NVML, sched, collectives: the default without
                  a GPU, and the default before GPU evidence);
  host_only       the default's parts one at a time, to attribute its cost: host spans and
  host_sched      steps alone; with the scheduler sampler (its periodic all-thread sample
  host_nvml       and the step-boundary marks); with NVML's poll and driver-sample drain
                  (`--modes parts` runs these with aa and default; they are not in `all`);
  default_no_baseline  the default with no baseline windows (`gpu_baseline_steps=0`): CUPTI
                  prepared at start and detached, armed only by the recorder's own trigger; beside
                  `default` it says whether the baseline windows' arm/detach cycles carry the cost;
  tiered_idle     the always-on layer plus CUPTI triggered, no window ever armed (no trigger, no
                  baseline windows: CUPTI never enabled);
  tiered_fired    the same, every on-window an armed window (`arm_gpu(K)`): the overhead per
                  armed step, the arming included;
  cupti           CUPTI always on, default activity kinds (kernels, memcpy/memset, runtime,
                  synchronization);
  cupti_kernel    CUPTI always on, kernels only (`cupti_kinds="kernel"`);
  cupti_binding   `cupti` with cupti-python's record objects instead of the raw-buffer parser
                  (`cupti_parser="binding"`): what the parser saves;
  torch_profiler  the reference: torch.profiler (CPU + CUDA activity) started for each
                  on-window and stopped after it (its trace processing falls between windows).
Loops: `transformer` is benchmarks/overhead_workload.py's (4 layers, 8 x 512 tokens, bf16 on
CUDA; a tiny CPU version without CUDA); `cpu` a NumPy loop with a few spans (no torch, no
CUDA); `auto` = transformer on CUDA, else cpu.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))  # overhead_workload

from workflow_lib.compare import stats  # noqa: E402
from workflow_lib.capture import FlightRecorder  # noqa: E402
from workflow_lib.capture.gpu_arming import DEFAULT_SOURCES  # noqa: E402

MODES = ("aa", "default", "default_no_baseline", "no_gpu", "tiered_idle", "tiered_fired", "cupti", "cupti_kernel", "cupti_binding", "torch_profiler")
# The default recorder's sources one at a time (attribution of its cost).
PARTS = {"host_only": ("host",), "host_sched": ("host", "sched"), "host_nvml": ("host", "nvml")}
# `--modes parts`: the A/A, the default and each of its parts (not in `all`: the H200 script's
# time budget holds `all` once; the parts get their own call with more pairs).
PART_MODES = ("aa", "default", *PARTS)
CONFIDENCE = 0.95
WARMUP_STEPS = 10


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def cpu_loop(rec):
    """A NumPy step: a few matmuls and some Python work, with spans as a workload writes them."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((160, 160))

    def step(i):
        with rec.span("data"):
            x = a + (i % 7)
        with rec.span("forward"):
            for _ in range(6):
                x = np.tanh(x @ a)
        with rec.span("python"):
            s = 0
            for j in range(2000):
                s += j
    return step, (lambda: None)


def build_recorder(mode: str, k: int, incidents_dir: str) -> FlightRecorder:
    if mode in ("aa", "default"):
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir)
    if mode == "default_no_baseline":
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir, gpu_baseline_steps=0)
    if mode == "no_gpu":
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir, sources=DEFAULT_SOURCES)
    if mode in PARTS:
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir, sources=PARTS[mode])
    if mode in ("tiered_idle", "tiered_fired"):
        # No trigger and no baseline windows: CUPTI is armed only by arm_gpu() (tiered_fired).
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir,
                              sources=(*DEFAULT_SOURCES, "cupti"), cupti_mode="triggered",
                              gpu_window_steps=k, gpu_baseline_steps=0)
    if mode in ("cupti", "cupti_kernel", "cupti_binding"):
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir,
                              sources=(*DEFAULT_SOURCES, "cupti"), cupti_mode="always",
                              cupti_kinds="kernel" if mode == "cupti_kernel" else None,
                              cupti_parser="binding" if mode == "cupti_binding" else "raw")
    if mode == "torch_profiler":  # the reference alone: the recorder is off (steps only)
        return FlightRecorder(incident_id="ovh", incidents_dir=incidents_dir, mode="off")
    raise ValueError(mode)


class Switch:
    """Turns the measured thing on and off between windows."""

    def __init__(self, mode: str, rec: FlightRecorder, k: int, torch, cuda: bool):
        self.mode, self.rec, self.k, self.torch, self.cuda = mode, rec, k, torch, cuda
        self.prof = None
        self.armed_windows = 0

    def on(self):
        if self.mode == "aa":
            return
        if self.mode == "torch_profiler":
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
            self.prof = profile(activities=acts)
            self.prof.start()
            return
        self.rec.resume()
        if self.mode == "tiered_fired" and self.rec.arm_gpu(self.k - 1):  # +1 inside: K armed steps
            self.armed_windows += 1

    def off(self) -> int:
        """End an on-window; returns the ns that took (a CUPTI flush and its parsing, the
        profiler's stop): reported, and charged to the window in `overhead_pct_with_close`."""
        t = time.perf_counter_ns()
        if self.mode == "aa":
            return 0
        if self.mode == "torch_profiler":
            if self.prof is not None:
                self.prof.stop()
                self.prof = None
            return time.perf_counter_ns() - t
        if self.mode == "tiered_fired" and self.rec._gpu_left:  # close the window with the on-window
            self.rec._close_gpu_window()
        if self.rec.cupti is not None:
            # This window's records are parsed now, not inside a later (off) window's steps.
            self.rec.cupti.flush()
        self.rec.pause()
        return time.perf_counter_ns() - t


def run_mode(mode: str, pairs: int, k: int, loop: str, budget_s: float, seed: int, work: str) -> dict:
    torch = _torch()
    cuda = bool(torch is not None and torch.cuda.is_available())
    if loop == "auto":
        loop = "transformer" if cuda else "cpu"
    if mode == "torch_profiler" and torch is None:
        return {"mode": mode, "skipped": "torch.profiler needs torch (not installed here)"}
    t_build = time.perf_counter_ns()
    rec = build_recorder(mode, k, work)
    t_built = time.perf_counter_ns()
    if loop == "transformer":
        if torch is None:
            return {"mode": mode, "skipped": "transformer loop needs torch"}
        import overhead_workload

        body, sync = overhead_workload.transformer(torch, cuda, _LateSpan(rec))
    else:
        body, sync = cpu_loop(_LateSpan(rec))
    for i in range(5):  # allocator, cuBLAS handles, autotuning: outside everything
        body(-1 - i)
    sync()
    t0 = time.perf_counter_ns()
    rec.start()
    t_started = time.perf_counter_ns()
    sw = Switch(mode, rec, k, torch, cuda)
    step_i = 0

    cpu_on, cpu_off = [], []  # the training thread's CPU ns per window (thread_time_ns)

    def window(cpu: list | None = None) -> list[int]:
        nonlocal step_i
        out = []
        c = time.thread_time_ns()
        for _ in range(k):
            a = time.perf_counter_ns()
            with rec.step(step_i):
                body(step_i)
                sync()
            out.append(time.perf_counter_ns() - a)
            step_i += 1
        if cpu is not None:
            cpu.append(time.thread_time_ns() - c)
        return out

    for _ in range(WARMUP_STEPS // k + 1):  # both states once, untimed
        sw.on()
        window()
        sw.off()
        window()
    rng = random.Random(seed)
    order, on_ns, off_ns, close_ns = [], [], [], []
    deadline = time.monotonic() + budget_s
    for p in range(pairs):
        if p >= 8 and time.monotonic() > deadline:
            break
        first_on = rng.random() < 0.5
        order.append("on-off" if first_on else "off-on")
        for state in ((True, False) if first_on else (False, True)):
            if state:
                sw.on()
                on_ns.append(window(cpu_on))
                close_ns.append(sw.off())
            else:
                off_ns.append(window(cpu_off))
    t_stop = time.perf_counter_ns()
    rec.resume()
    rec.stop()
    t_stopped = time.perf_counter_ns()
    on_m = np.array([np.mean(w) for w in on_ns])
    off_m = np.array([np.mean(w) for w in off_ns])
    # On log ratios: swapping a pair's labels negates log(on/off) exactly, so under no effect
    # each pair's value is symmetric about 0, as the signed-rank interval needs (on/off - 1 is
    # skewed when windows are noisy); the estimate and its ends go back to percent.
    rel = np.log(on_m / off_m)
    est, lo, hi = (float(np.expm1(v)) * 100.0 for v in stats.hodges_lehmann(rel, CONFIDENCE))
    # The same pairs in absolute time: what each recorded (or armed) step costs.
    d_est, d_lo, d_hi = stats.hodges_lehmann((on_m - off_m) / 1e3, CONFIDENCE)
    # The training thread's own CPU time, same pairs: work the recorder does on that thread
    # (spans, step marks) shows here; time it waits (for the GIL, for the GPU) does not, so
    # the two measures together say which one a wall-clock overhead is.
    t_est, t_lo, t_hi = stats.hodges_lehmann((np.array(cpu_on) - np.array(cpu_off)) / k / 1e3, CONFIDENCE)
    close = np.array(close_ns, dtype=float)
    c_est, c_lo, c_hi = (float(np.expm1(v)) * 100.0
                         for v in stats.hodges_lehmann(np.log((on_m + close / k) / off_m), CONFIDENCE))
    out = {
        "mode": mode, "loop": loop, "device": "cuda" if cuda else "cpu", "k": k, "pairs": len(rel),
        "overhead_pct": {"estimate": float(est), "low": float(lo), "high": float(hi), "confidence": CONFIDENCE},
        "added_us_per_step": {"estimate": float(d_est), "low": float(d_lo), "high": float(d_hi)},
        "overhead_pct_with_close": {"estimate": float(c_est), "low": float(c_lo), "high": float(c_hi)},
        "added_thread_cpu_us_per_step": {"estimate": float(t_est), "low": float(t_lo), "high": float(t_hi)},
        "window_close_ms_median": float(np.median(close) / 1e6),
        "step_ms_off_median": float(np.median(off_m) / 1e6), "step_ms_on_median": float(np.median(on_m) / 1e6),
        "startup_ms": (t_built - t_build + t_started - t0) / 1e6, "teardown_ms": (t_stopped - t_stop) / 1e6,
        "span_path": getattr(rec.host, "span_path", None),
        "raw": {"order": order, "on_step_ns": on_ns, "off_step_ns": off_ns, "close_ns": close_ns,
                "on_thread_cpu_ns": cpu_on, "off_thread_cpu_ns": cpu_off},
    }
    if rec.cupti is not None:
        cu = rec.cupti
        out["cupti"] = {"observed": cu.reason_absent is None, "reason_absent": cu.reason_absent, "records": cu.records,
                        "kinds": list(cu.kinds), "parser": cu.parser_used, "parser_note": cu.parser_note,
                        "raw_buffers": cu.raw.buffers if cu.raw else None,
                        "raw_buffers_unread": cu.raw.unread if cu.raw else None, "errors": cu.errors[:3]}
    if mode == "tiered_fired":
        out["armed_windows"] = sw.armed_windows
    if rec.enabled:  # which GPU windows the recorder armed by itself (the default's baseline and trigger)
        out["gpu_evidence"] = rec.report()["gpu_evidence"]
    return out


class _LateSpan:
    """`rec.span` looked up per call, as `with rec.span(...)` in the README's loop does, so a
    paused recorder's no-op lookup applies (a lookup held across a pause keeps recording
    into the ring, and snapshots leave those rows out; the cost is what this measures)."""

    def __init__(self, rec):
        self.rec = rec

    def span(self, name):
        return self.rec.span(name)


_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
steps = 20
if {with_recorder}:
    from workflow_lib.capture import FlightRecorder
    rec = FlightRecorder(incident_id="startup", incidents_dir={work!r}).start()
    for i in range(steps):
        with rec.step(i):
            pass
    rec.stop()
else:
    for i in range(steps):
        pass
"""


def process_startup(pairs: int, seed: int, work: str) -> dict:
    """Start-up and teardown at the process level: a child that imports the recorder, starts
    it, runs 20 empty steps and stops it, against a child that runs the same steps bare; the
    parent times each child's whole life (interpreter start included in both), pairs in
    seeded random order, HL over the pairs' differences in ms."""
    root = str(Path(__file__).resolve().parents[1])
    rng = random.Random(seed + 1)
    diffs = []
    for _ in range(pairs):
        t = {}
        for arm in (rng.sample([True, False], 2)):
            a = time.perf_counter_ns()
            subprocess.run([sys.executable, "-c", _CHILD.format(root=root, work=work, with_recorder=arm)], check=True)
            t[arm] = time.perf_counter_ns() - a
        diffs.append((t[True] - t[False]) / 1e6)
    est, lo, hi = stats.hodges_lehmann(np.array(diffs), CONFIDENCE)
    return {"pairs": pairs, "added_ms": {"estimate": float(est), "low": float(lo), "high": float(hi)},
            "what": "import + construct + start + 20 empty steps + stop of the default recorder, per process"}


def summarize(results: list[dict], startup: dict | None = None) -> dict:
    by = {r["mode"]: r for r in results if "overhead_pct" in r}
    summary = {"modes": {m: {k: v for k, v in r.items() if k != "raw"} for m, r in by.items()},
               "skipped": {r["mode"]: r["skipped"] for r in results if "skipped" in r}}
    if startup is not None:
        summary["process_startup_teardown"] = startup
    cu, tp = by.get("cupti"), by.get("torch_profiler")
    if cu and tp:
        c, t = cu["overhead_pct"], tp["overhead_pct"]
        summary["cupti_vs_torch_profiler"] = {
            "ratio_of_estimates": c["estimate"] / t["estimate"] if t["estimate"] else None,
            "cupti_high_below_half_profiler_low": c["high"] <= 0.5 * t["low"],
            "rule": "CUPTI always on <= 1/2 of torch.profiler: cupti's upper end <= half of the profiler's lower end",
        }
    d = by.get("default")
    if d:  # the recorder's budget: the default's upper end within 1%
        summary["default_budget"] = {"high_pct": d["overhead_pct"]["high"], "within_1pct": d["overhead_pct"]["high"] <= 1.0,
                                     "gpu_evidence": d.get("gpu_evidence")}
    aa = by.get("aa")
    if aa:
        o = aa["overhead_pct"]
        summary["aa"] = {"covers_zero": o["low"] <= 0 <= o["high"], "half_width_pct": (o["high"] - o["low"]) / 2}
    return summary


def table(summary: dict) -> str:
    lines = ["| mode | overhead % (HL) | 95% interval | added us/step [95%] | thread CPU us/step [95%] | "
             "with window close % [95%] | pairs x K | step ms (off) | start-up ms | teardown ms | CUPTI |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m, r in summary["modes"].items():
        o, d, w = r["overhead_pct"], r["added_us_per_step"], r["overhead_pct_with_close"]
        tc = r.get("added_thread_cpu_us_per_step", {"estimate": float("nan"), "low": float("nan"), "high": float("nan")})
        c = r.get("cupti")
        cu = "" if c is None else (f"{c['parser']}, {c['records']} records" if c["observed"]
                                   else f"absent: {c['reason_absent']}")
        lines.append(f"| {m} | {o['estimate']:+.2f} | [{o['low']:+.2f}, {o['high']:+.2f}] | "
                     f"{d['estimate']:+.0f} [{d['low']:+.0f}, {d['high']:+.0f}] | "
                     f"{tc['estimate']:+.1f} [{tc['low']:+.1f}, {tc['high']:+.1f}] | "
                     f"{w['estimate']:+.2f} [{w['low']:+.2f}, {w['high']:+.2f}] | {r['pairs']} x {r['k']} | "
                     f"{r['step_ms_off_median']:.2f} | {r['startup_ms']:.1f} | {r['teardown_ms']:.1f} | {cu} |")
    for m, why in summary["skipped"].items():
        lines.append(f"| {m} | skipped: {why} | | | | | | | | | |")
    if "aa" in summary:
        lines.append(f"A/A: interval covers 0: {summary['aa']['covers_zero']}, half-width "
                     f"{summary['aa']['half_width_pct']:.2f}%")
    if "default_budget" in summary:
        b = summary["default_budget"]
        lines.append(f"default: upper end {b['high_pct']:+.2f}% (budget 1%: {'within' if b['within_1pct'] else 'OVER'})")
    if "process_startup_teardown" in summary:
        p = summary["process_startup_teardown"]["added_ms"]
        lines.append(f"process start-up + teardown of the default recorder: {p['estimate']:+.0f} ms "
                     f"[{p['low']:+.0f}, {p['high']:+.0f}] per process")
    if "cupti_vs_torch_profiler" in summary:
        c = summary["cupti_vs_torch_profiler"]
        lines.append(f"CUPTI / torch.profiler overhead: {c['ratio_of_estimates']:.2f}; "
                     f"cupti high <= half of profiler low: {c['cupti_high_below_half_profiler_low']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="all", help=f"comma list of {MODES + tuple(PARTS)}, 'all' or 'parts'")
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--k", type=int, default=10, help="steps per window")
    ap.add_argument("--loop", choices=("auto", "transformer", "cpu"), default="auto")
    ap.add_argument("--budget-s", type=float, default=40.0, help="per mode: stop adding pairs after this (>= 8 pairs)")
    ap.add_argument("--mode-budget", action="append", default=[], metavar="MODE=S",
                    help="this mode's own --budget-s (e.g. torch_profiler=40: its effect needs few pairs)")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--work", default=None, help="directory for the recorder's incidents dir (default: a tmp dir)")
    ap.add_argument("--json", default=None, help="summary (every interval) to this file")
    ap.add_argument("--raw", default=None, help="every window's step times to this file")
    ap.add_argument("--mode-timeout-s", type=float, default=120.0, help="a mode's process is stopped after this")
    ap.add_argument("--startup-pairs", type=int, default=8, help="process-level start-up/teardown pairs (0: none)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one mode, JSON on stdout
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): two modes on the CPU loop "
                    "for a few steps; it runs, its numbers mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.pairs, args.k, args.loop, args.budget_s, args.startup_pairs = 2, 3, "cpu", 1.0, 1
        args.modes = "aa,default"  # the A/A and the default recorder (on CPU: no GPU windows): the rest is the same code
    known = MODES + tuple(PARTS)
    modes = {"all": MODES, "parts": PART_MODES}.get(args.modes) or tuple(m.strip() for m in args.modes.split(","))
    bad = [m for m in modes if m not in known]
    if bad:
        ap.error(f"unknown mode(s) {bad}; known: {known}, or 'all' / 'parts'")
    import tempfile

    work = args.work or tempfile.mkdtemp(prefix="ovh-")
    if args.one:
        r = run_mode(modes[0], args.pairs, args.k, args.loop, args.budget_s, args.seed, work)
        sys.stdout.write("RESULT " + json.dumps(r) + "\n")
        return 0
    results = []
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]))
    # One BLAS thread: the CPU loop's matmuls must not compete with the recorder's threads
    # for cores in one arm more than the other (and the H200 loop runs on the GPU anyway).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    budgets = {}
    for spec in args.mode_budget:
        name, _, sec = spec.partition("=")
        try:
            budgets[name.strip()] = float(sec)
        except ValueError:
            ap.error(f"--mode-budget {spec!r}: expected MODE=SECONDS")
    for m in modes:
        t = time.monotonic()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", "--modes", m, "--pairs", str(args.pairs),
               "--k", str(args.k), "--loop", args.loop, "--budget-s", str(budgets.get(m, args.budget_s)), "--seed", str(args.seed),
               "--work", os.path.join(work, m)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.mode_timeout_s)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if p.returncode != 0 or line is None:
                r = {"mode": m, "skipped": f"child failed rc={p.returncode}: {p.stderr.strip().splitlines()[-1:]}"}
            else:
                r = json.loads(line[len("RESULT "):])
        except subprocess.TimeoutExpired:
            r = {"mode": m, "skipped": f"over --mode-timeout-s {args.mode_timeout_s:.0f} s"}
        results.append(r)
        if args.json:  # after every mode: a run cut short still leaves what it measured
            Path(args.json).write_text(json.dumps(summarize(results), indent=1) + "\n")
        if args.raw:
            Path(args.raw).write_text(json.dumps({x["mode"]: x.get("raw") for x in results}) + "\n")
        o = r.get("overhead_pct")
        print(f"{m:15s} " + (f"{o['estimate']:+.2f}% [{o['low']:+.2f}, {o['high']:+.2f}] over {r['pairs']} pairs"
                             if o else r["skipped"]) + f"  ({time.monotonic() - t:.0f} s)", flush=True)
    startup = None
    if args.startup_pairs:
        t = time.monotonic()
        startup = process_startup(args.startup_pairs, args.seed, os.path.join(work, "startup"))
        p = startup["added_ms"]
        print(f"{'process start':15s} {p['estimate']:+.0f} ms [{p['low']:+.0f}, {p['high']:+.0f}] over "
              f"{startup['pairs']} pairs  ({time.monotonic() - t:.0f} s)", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(summarize(results, startup), indent=1) + "\n")
    print(table(summarize(results, startup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
