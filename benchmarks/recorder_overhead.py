"""Recorder overhead, measured with stallcase's own trials stage and statistics.

    python benchmarks/recorder_overhead.py [--parts span,matrix,trials] [--blocks 6] [--steps 200]
        [--json OUT.json] [--rows OUT.md] [--budget-s 400]
    python benchmarks/recorder_overhead.py --span-only      # (a) alone, seconds, no GPU needed

(a) span: one `with rec.span()` against a bare pair of perf_counter_ns calls, in shuffled
    rounds; the added cost's 95% interval is Hodges-Lehmann over rounds (workflow_lib.compare.stats).
(b) matrix (GPU): which CUPTI activity kinds, buffer sizes and flush policies cost what on
    the launch-bound loop (300 tiny kernels per step), against no CUPTI and torch.profiler,
    in shuffled rounds inside one process; a 95% interval on each mode's overhead over rounds.
(c) trials: the real pipeline (Snakemake, profiles/local) on an incident captured from
    benchmarks/overhead_workload.py with the baseline recorder mode, and the candidate
    `--recorder off` (set_args): interleaved blocks with A/A control runs, trials.record_runs
    on, comparison.json's Hodges-Lehmann interval on candidate/baseline. The overhead of the
    baseline mode is baseline/off - 1 = 1/ratio - 1, its interval [1/ratio_high - 1,
    1/ratio_low - 1]; the A/A floor is the comparison's noise floor. Comparisons: transformer
    tiered (the default recorder: always-on layer + CUPTI armed by the trigger), launch-bound
    cupti (always on), launch-bound torch_profiler. Without CUDA the same pipeline runs on tiny
    CPU loops (a check that the GPU run works, not a measurement of anything).
A target is met only when the interval's upper end is under it: span <= 300 ns; default
recorder <= 0.5% (estimate) with the 95% upper end <= 1%; CUPTI's overhead <= half of
torch.profiler's with intervals that do not overlap.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from workflow_lib.capture import Budget, FlightRecorder  # noqa: E402
from workflow_lib.capture.sources.host import SPAN_PATH  # noqa: E402
from workflow_lib.compare.stats import hodges_lehmann  # noqa: E402

SPAN_TARGET_NS = 300
DEFAULT_TARGET = 0.005


# ---- (a) span cost -----------------------------------------------------------------
def _bare(n: int) -> float:
    pc = time.perf_counter_ns
    t0 = pc()
    for _ in range(n):
        a = pc()
        b = pc()
    return (pc() - t0) / n


def _spans(rec, n: int) -> float:
    pc = time.perf_counter_ns
    span = rec.span
    t0 = pc()
    for _ in range(n):
        with span("x"):
            pass
    return (pc() - t0) / n


def _per_call_ns(f, n: int) -> float:
    pc = time.perf_counter_ns
    t0 = pc()
    for _ in range(n):
        f()
    return (pc() - t0) / n


def _decorated(rec, n: int) -> float:
    @rec.span("f")
    def f():
        return None

    return _per_call_ns(f, n)


def _plain_call(n: int) -> float:
    def f():
        return None

    return _per_call_ns(f, n)


def span_cost(rounds: int = 15, n: int = 100_000) -> dict:
    rec = FlightRecorder(incident_id="bench", sources=("host",), budget=Budget(retained_bytes=16 << 20))
    rec.start()
    res = {"bare_pair_ns": [], "span_ns": [], "decorated_call_ns": [], "plain_call_ns": []}
    for _ in range(rounds):
        order = ["bare", "span", "dec", "plain"]
        random.shuffle(order)
        for o in order:
            if o == "bare":
                res["bare_pair_ns"].append(_bare(n))
            elif o == "span":
                res["span_ns"].append(_spans(rec, n))
            elif o == "dec":
                res["decorated_call_ns"].append(_decorated(rec, n))
            else:
                res["plain_call_ns"].append(_plain_call(n))
    rec.stop()
    med = {k: statistics.median(v) for k, v in res.items()}
    diffs = np.array([s - b for s, b in zip(res["span_ns"], res["bare_pair_ns"])])
    added = statistics.median(diffs.tolist())
    est, lo, hi = hodges_lehmann(diffs, 0.95)
    added_dec = statistics.median([d - p for d, p in zip(res["decorated_call_ns"], res["plain_call_ns"])])
    return {"rounds": rounds, "iterations_per_round": n, "median_ns": med,
            "span_added_ns": added, "span_added_hl_ns": float(est), "span_added_ci95_ns": [float(lo), float(hi)],
            "decorator_added_ns": added_dec, "span_path": SPAN_PATH,
            "target_added_ns": SPAN_TARGET_NS, "meets_target": bool(hi <= SPAN_TARGET_NS)}


# ---- (b) CUPTI cost matrix on the launch-bound loop ---------------------------------------
MATRIX = {  # mode -> CuptiSource settings (None: no CUPTI; "torch_profiler": torch.profiler)
    "none": None,
    "kernel": {"kinds": ("CONCURRENT_KERNEL",)},
    "kernel+runtime": {"kinds": ("CONCURRENT_KERNEL", "RUNTIME")},
    "all_4MiB": {},  # what --recorder cupti enables: kernels, memcpy, memset, runtime, sync
    "all_1MiB": {"buffer_bytes": 1 << 20},
    "all_32MiB": {"buffer_bytes": 32 << 20},
    "all_flush100ms": {"flush_period_ms": 100},
    "torch_profiler": "torch_profiler",
}


def _gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return None


def _interval_pct(logs: list[float]) -> dict:
    x = np.asarray(logs, float)
    est, lo, hi = hodges_lehmann(x, 0.95)
    f = lambda v: None if not math.isfinite(float(v)) else 100 * math.expm1(float(v))
    return {"pct": f(est), "low_pct": f(lo), "high_pct": f(hi), "rounds": int(x.size)}


def _cupti_report(src) -> dict:
    """What the CUPTI source kept in one run: lets a reader check that launches, syncs and
    kernels arrived and which runtime calls were left out, and where."""
    c = src.api.copy()
    ids = np.unique(c.columns["name"]) if c.rows else np.zeros(0, np.int64)
    names = [src.name_list[i] if 0 <= i < len(src.name_list) else "<unknown>" for i in ids.tolist()]
    return {"kinds": list(src.kinds), "records": src.records, "errors": list(src.errors)[:3],
            "kernels_written": src.kernels.written, "runtime_api_written": src.api.written,
            "memcpy_written": src.memcpy.written, "runtime_calls_left_out_at": src.runtime_filter_at,
            "runtime_calls_dropped_at_ingest": src.runtime_calls_dropped,
            "runtime_filter_note": src.runtime_filter_note, "runtime_api_names": sorted(names)[:40],
            "buffer_bytes": src.buffer_bytes, "flush_period_ms": src.flush_period_ms}


def cupti_matrix(rounds: int, steps: int) -> dict:
    reason = _gpu_reason()
    if reason:
        return {"status": "not_observed", "reason": f"no GPU: {reason}"}
    import torch

    from workflow_lib.capture.sources.cupti import CuptiSource, cupti as binding

    if binding is None:
        return {"status": "not_observed", "reason": "cupti-python absent"}
    small = torch.zeros(256, device="cuda")

    def body():
        for _ in range(300):
            small.add_(1.0)

    def run(mode) -> tuple[float, dict]:
        cfg = MATRIX[mode]
        src = prof = None
        if cfg == "torch_profiler":
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
        elif cfg is not None:
            src = CuptiSource(1 << 18, 1 << 18, 1 << 12, **cfg)
            src.start()
            if not src.running:  # measuring a CUPTI that is not on would report its cost as zero
                raise RuntimeError(src.reason_absent or "CUPTI did not start")
        ts = []
        try:
            for _ in range(steps):
                t0 = time.perf_counter_ns()
                body()
                torch.cuda.synchronize()
                ts.append(time.perf_counter_ns() - t0)
        finally:
            info = {}
            if src is not None:
                src.stop()
                info = _cupti_report(src)
            if prof is not None:
                prof.__exit__(None, None, None)
        return statistics.median(ts[steps // 10:]), info

    for _ in range(50):
        body()
    torch.cuda.synchronize()
    per = {m: [] for m in MATRIX}
    infos = {}
    errors = {}
    for _ in range(rounds):
        order = list(MATRIX)
        random.shuffle(order)
        for m in order:
            if m in errors:
                continue
            try:
                med, info = run(m)
            except Exception as exc:  # a mode that cannot run is reported, not fatal
                errors[m] = f"{type(exc).__name__}: {exc}"
                continue
            per[m].append(med)
            infos[m] = info
    base = per["none"]
    out = {}
    for m, vals in per.items():
        if m == "none" or not vals:
            continue
        n = min(len(vals), len(base))
        out[m] = {"median_step_ms": statistics.median(vals) / 1e6, **_interval_pct([math.log(vals[i] / base[i]) for i in range(n)]),
                  "last_run": infos.get(m)}
    return {"status": "observed", "device": torch.cuda.get_device_name(0), "rounds": rounds, "steps": steps,
            "none_median_step_ms": statistics.median(base) / 1e6 if base else None, "modes": out, "errors": errors}


# ---- (c) trials stage: overhead as a stallcase comparison ---------------------------------
REPO = Path(__file__).resolve().parent.parent
COMPARISONS = (  # (name, loop, baseline recorder mode); the candidate is always --recorder off
    ("transformer_tiered", "transformer", "tiered"),
    ("launch_bound_cupti", "launch_bound", "cupti"),
    ("launch_bound_torch_profiler", "launch_bound", "torch_profiler"),
)


def _overhead_from_ratio(est: dict) -> dict:
    """candidate(off)/baseline ratio record -> baseline overhead over off, in percent."""
    inv = lambda r: None if r is None or r <= 0 else 100 * (1 / r - 1)
    return {"pct": inv(est.get("ratio")), "low_pct": inv(est.get("ratio_high")), "high_pct": inv(est.get("ratio_low"))}


def _config(incident: str, inc_dir: Path, res_dir: Path, blocks: int, skip: int, statistic: str = "median") -> dict:
    return {"incident": incident, "incidents_dir": str(inc_dir), "results_dir": str(res_dir), "experiment": None,
            "candidate": {"set_args": {"--recorder": "off"}},
            "trials": {"blocks": blocks, "runs_per_arm": 1, "control_runs": 1, "warmup_runs": 0, "seed": 20261201,
                       "max_retries": 1, "max_failed_fraction": 0.34, "confidence": 0.95, "run_timeout_s": 300,
                       "metric": {"name": "step_time", "source": "recorder_steps", "statistic": statistic,
                                  "skip_steps": skip, "unit": "ns"}, "record_runs": True},
            "demo": {"args": []}}


def _capture_check(manifest: Path) -> dict:
    """What the captured incident holds about GPU activity (the triggered window)."""
    from workflow_lib.capture.sources.cupti import covered_steps
    from workflow_lib.core.incident import read_incident

    inc = read_incident(manifest.parent)
    m = inc.manifest
    cu = m["sources"].get("cupti", {})
    d = cu.get("detail") or {}
    out = {"cupti_status": cu.get("status"), "cupti_reason": cu.get("reason"), "mode": d.get("mode"),
           "windows": d.get("windows"), "trigger_fired": (m.get("recorder") or {}).get("trigger", {}) and
           m["recorder"]["trigger"].get("fired"), "incident": m["incident_id"]}
    try:
        st = inc.table("steps").to_pandas()
        cov = covered_steps(m, st["start_ns"], st["end_ns"])
        out["steps"] = int(len(st))
        out["steps_with_gpu_activity"] = [int(x) for x in st["step_id"][cov]]
    except Exception as exc:
        out["steps_error"] = f"{type(exc).__name__}: {exc}"
    try:
        out["kernels"] = int(inc.table("kernels").num_rows)
    except Exception as exc:
        out["kernels"] = f"none ({type(exc).__name__})"
    return out


def trial_comparison(name: str, loop: str, mode: str, work: Path, blocks: int, steps: int, skip: int,
                     cores: int, log) -> dict:
    inc_dir, res_dir = work / "incidents", work / "results"
    inc_dir.mkdir(parents=True, exist_ok=True)
    incident = f"ovh-{name.replace('_', '-')}"
    argv = [sys.executable, str(REPO / "benchmarks" / "overhead_workload.py"), "--loop", loop, "--recorder", mode,
            "--steps", str(steps), "--incident", incident, "--incidents-dir", str(inc_dir)]
    if mode == "tiered":
        argv += ["--slow-step", str(skip + 20)]  # the capture's trigger fires once: a triggered GPU window
    env = {k: v for k, v in os.environ.items() if k not in ("STALLCASE_RECORDER", "STALLCASE_RECORDER_MODE",
                                                             "STALLCASE_TRIAL_ARM", "STALLCASE_INCIDENTS_DIR")}
    t0 = time.time()
    cap = subprocess.run(argv, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    log.write(f"== capture {name}: exit {cap.returncode}\n{cap.stdout[-2000:]}\n{cap.stderr[-4000:]}\n")
    manifest = inc_dir / incident / "manifest.json"
    if cap.returncode != 0 or not manifest.exists():
        return {"status": "failed", "stage": "capture", "error": cap.stderr[-800:]}
    res = {"capture": _capture_check(manifest), "capture_s": time.time() - t0}
    import yaml

    cfg_path = work / f"{name}.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(incident, inc_dir, res_dir, blocks, skip)))
    target = res_dir / incident / "comparison.json"
    # `python -m snakemake`: works where the wheels were installed with --target (no scripts on PATH).
    cmd = [sys.executable, "-m", "snakemake", str(target), "--profile", "profiles/local", "--cores", str(cores), "--configfile", str(cfg_path), "--replace-workflow-config"]
    t1 = time.time()
    run = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=1800)
    log.write(f"== snakemake {name}: exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}\n")
    res["pipeline_s"] = time.time() - t1
    if not target.exists():
        return {**res, "status": "failed", "stage": "snakemake", "error": run.stderr[-1500:]}
    comp = json.loads(target.read_text())
    res.update(status="observed", verdict=comp["verdict"], counts=comp["counts"],
               ratio_off_over_baseline=comp["estimate"], overhead=_overhead_from_ratio(comp["estimate"]),
               aa_floor_pct=comp["noise_floor"]["pct"],
               aa_control_overhead=_overhead_from_ratio(comp["noise_floor"]["control"]))
    res["mean_metric"] = _recompare_with_mean(res_dir / incident)
    res["runs"] = _run_summary(res_dir / incident)
    return res


def _executions(rdir: Path) -> tuple[dict, dict, dict]:
    from workflow_lib.core import records

    plan = json.loads((rdir / "plan.json").read_text())
    ex = {p.stem: json.loads(p.read_text()) for p in sorted((rdir / "execution").glob("*.json"))}
    return plan, ex, {b: records.digest_of(e) for b, e in ex.items()}


def _recompare_with_mean(rdir: Path) -> dict:
    """The same executions compared on each run's mean step time (throughput cost, where the
    median hides slow tails such as an armed CUPTI window or a snapshot written mid-run)."""
    from workflow_lib.compare import build as compare
    from workflow_lib.core import records, typed
    from workflow_lib.plan.types import Plan
    from workflow_lib.trials.types import Execution

    try:
        plan, ex, _ = _executions(rdir)
        for e in ex.values():
            for r in e["runs"]:
                if r.get("status") == "ok" and r.get("values_ns"):
                    r["metric_ns"] = float(np.mean(r["values_ns"]))  # values_ns already excludes skip_steps
        dig = {b: records.digest_of(e) for b, e in ex.items()}
        plan_digest = next(iter(ex.values()))["plan_digest"]  # the plan itself is unchanged
        c = compare.compare(typed.of_json(Plan, plan), {b: typed.of_json(Execution, e) for b, e in ex.items()},
                            dig, plan_digest)
        return {"overhead": _overhead_from_ratio(c.estimate.to_json()), "aa_floor_pct": c.noise_floor.pct,
                "verdict": c.verdict}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _run_summary(rdir: Path) -> dict:
    try:
        _, ex, _ = _executions(rdir)
    except Exception as exc:
        return {"error": str(exc)}
    per = {}
    for e in ex.values():
        for r in e["runs"]:
            per.setdefault(r["arm"], []).append(None if r.get("metric_ns") is None else r["metric_ns"] / 1e6)
    return {arm: {"n": len(v), "median_ms": statistics.median([x for x in v if x is not None]) if any(v) else None,
                  "min_ms": min([x for x in v if x is not None], default=None),
                  "max_ms": max([x for x in v if x is not None], default=None)} for arm, v in per.items()}


def trials_overhead(work: Path, blocks: int, steps: int, skip: int, budget_s: float, only: list[str] | None,
                    save=lambda *_: None) -> dict:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cores = os.cpu_count() or 2
    t0 = time.time()
    out = {"device": "cuda" if _gpu_reason() is None else f"cpu ({_gpu_reason()})", "blocks": blocks, "steps": steps,
           "skip_steps": skip, "comparisons": {}}
    with open(work / "pipeline.log", "w", encoding="utf-8") as log:
        for name, loop, mode in COMPARISONS:
            if only and name not in only:
                continue
            if time.time() - t0 > budget_s:
                out["comparisons"][name] = {"status": "not_run", "reason": f"time budget {budget_s:.0f} s spent"}
                continue
            try:
                out["comparisons"][name] = trial_comparison(name, loop, mode, work / name, blocks, steps, skip, cores, log)
            except Exception as exc:
                out["comparisons"][name] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            log.flush()
            c = out["comparisons"][name]
            print(f"(c) {name}: {_fmt_trial(c)}", flush=True)
            save(out)  # a run stopped at its time limit keeps what was measured
    out["elapsed_s"] = time.time() - t0
    return out


def _fmt_iv(o: dict | None) -> str:
    if not o or o.get("pct") is None:
        return "n/a"
    lo, hi = o.get("low_pct"), o.get("high_pct")
    iv = "n/a" if lo is None or hi is None else f"[{lo:+.2f}%, {hi:+.2f}%]"
    return f"{o['pct']:+.2f}% {iv}"


def _fmt_trial(c: dict) -> str:
    if c.get("status") != "observed":
        return f"{c.get('status')}: {c.get('reason') or c.get('stage', '')} {str(c.get('error', ''))[-300:]}"
    mm = c.get("mean_metric", {})
    return (f"overhead (median metric) {_fmt_iv(c['overhead'])}; A/A floor {c['aa_floor_pct']}; "
            f"A/A control {_fmt_iv(c['aa_control_overhead'])}; mean metric {_fmt_iv(mm.get('overhead'))}; "
            f"verdict {c['verdict']}; blocks {c['counts']['valid_blocks']}/{c['counts']['planned_blocks']}; "
            f"runs {c.get('runs')}; capture {c.get('capture')}")


def rows(res: dict) -> str:
    """docs/benchmarks.md rows of this run."""
    m = res["machine"]
    lines = [f"Run {res['date_utc']}, {res.get('device_name', m['node'])}, Python {m['python']}, {m['cpus']} CPUs.", "",
             "| measurement | result (95% interval) | target | met |", "|---|---|---|---|"]
    s = res.get("span")
    if s:
        lines.append(f"| span added over a perf_counter_ns pair ({s['span_path']} path) | {s['span_added_hl_ns']:.0f} ns "
                     f"[{s['span_added_ci95_ns'][0]:.0f}, {s['span_added_ci95_ns'][1]:.0f}] | <= 300 ns (upper end) | "
                     f"{'yes' if s['meets_target'] else 'no'} |")
    t = (res.get("trials") or {}).get("comparisons", {})
    tt = t.get("transformer_tiered", {})
    if tt.get("status") == "observed":
        o = tt["overhead"]
        met = o["pct"] is not None and o["high_pct"] is not None and o["pct"] <= 0.5 and o["high_pct"] <= 1.0
        lines.append(f"| default recorder (tiered), transformer, trials stage, median metric | {_fmt_iv(o)} | "
                     f"<= 0.5%, upper end <= 1% | {'yes' if met else 'no'} |")
        mm = tt.get("mean_metric", {}).get("overhead")
        if mm:
            lines.append(f"| same runs, mean step time | {_fmt_iv(mm)} | upper end <= 1% | "
                         f"{'yes' if mm.get('high_pct') is not None and mm['high_pct'] <= 1.0 else 'no'} |")
        lines.append(f"| A/A control (A' vs A), transformer | {_fmt_iv(tt['aa_control_overhead'])} | - | - |")
    lc, lt = t.get("launch_bound_cupti", {}), t.get("launch_bound_torch_profiler", {})
    for name, c in (("CUPTI always on", lc), ("torch.profiler", lt)):
        if c.get("status") == "observed":
            lines.append(f"| {name}, launch-bound, trials stage | {_fmt_iv(c['overhead'])} | - | - |")
    if lc.get("status") == "observed" and lt.get("status") == "observed":
        a, b = lc["overhead"], lt["overhead"]
        ok = None not in (a["pct"], b["pct"], a["high_pct"], b["low_pct"])
        met = ok and a["pct"] <= 0.5 * b["pct"] and a["high_pct"] < b["low_pct"]
        lines.append(f"| CUPTI <= half of torch.profiler, intervals apart | {a['pct']:+.1f}% vs {b['pct']:+.1f}% | "
                     f"ratio <= 0.5, no overlap | {'yes' if met else 'no'} |" if ok else
                     "| CUPTI <= half of torch.profiler | n/a | | no |")
    mx = res.get("matrix") or {}
    if mx.get("status") == "observed":
        for mode, v in mx["modes"].items():
            lines.append(f"| launch-bound in-process: {mode} | {_fmt_iv(v)} ({v['median_step_ms']:.3f} ms/step) | - | - |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="span,matrix,trials")
    ap.add_argument("--span-rounds", type=int, default=15)
    ap.add_argument("--span-only", action="store_true", help="measure (a) only: no GPU part")
    ap.add_argument("--matrix-rounds", type=int, default=8)
    ap.add_argument("--matrix-steps", type=int, default=100)
    ap.add_argument("--blocks", type=int, default=6, help="trial blocks per comparison (6: fewest for a 95%% interval)")
    ap.add_argument("--steps", type=int, default=200, help="steps per trial run")
    ap.add_argument("--skip-steps", type=int, default=20)
    ap.add_argument("--only", default=None, help="comma-separated comparison names of (c)")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no new comparison after this many seconds of (c)")
    ap.add_argument("--work", default=None, help="work directory of (c) (default: $OUT/overhead_trials or /tmp)")
    ap.add_argument("--json", default=None, help="results (default: $OUT/recorder_overhead.json when OUT is set)")
    ap.add_argument("--rows", default=None, help="docs/benchmarks.md rows (default: $OUT/recorder_overhead_rows.md)")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): the span part for a few "
                    "rounds and the CUPTI matrix (not observed without a GPU); the trials part runs whole pipelines, "
                    "so it is left to the GPU runs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.parts, args.span_rounds, args.matrix_rounds, args.matrix_steps = "span,matrix", 3, 1, 10
    parts = {"span"} if args.span_only else set(args.parts.split(","))
    out_env = os.environ.get("OUT")
    res = {"machine": {"node": platform.node(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "python": platform.python_version()},
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if _gpu_reason() is None:
        import torch

        res["device_name"] = torch.cuda.get_device_name(0)
    dest = args.json or (os.path.join(out_env, "recorder_overhead.json") if out_env else None)
    rdest = args.rows or (os.path.join(out_env, "recorder_overhead_rows.md") if out_env else None)

    def save(trials=None):
        if trials is not None:
            res["trials"] = trials
        if dest:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            Path(dest).write_text(json.dumps(res, indent=2, default=str) + "\n")
        if rdest:
            Path(rdest).write_text(rows(res))

    if "span" in parts:
        res["span"] = span_cost(args.span_rounds)
        s = res["span"]
        print(f"(a) span path {s['span_path']}: enter+exit {s['median_ns']['span_ns']:.0f} ns; bare perf_counter_ns pair: "
              f"{s['median_ns']['bare_pair_ns']:.0f} ns; added {s['span_added_hl_ns']:.0f} ns "
              f"[{s['span_added_ci95_ns'][0]:.0f}, {s['span_added_ci95_ns'][1]:.0f}] "
              f"(target: upper end <= {SPAN_TARGET_NS} ns: {'met' if s['meets_target'] else 'NOT met'}); "
              f"decorator adds {s['decorator_added_ns']:.0f} ns per call", flush=True)
    if "matrix" in parts:
        res["matrix"] = mx = cupti_matrix(args.matrix_rounds, args.matrix_steps)
        if mx["status"] != "observed":
            print(f"(b) not observed: {mx['reason']}")
        else:
            print(f"(b) launch-bound, no CUPTI: {mx['none_median_step_ms']:.3f} ms/step; errors {mx['errors']}")
            for m, v in mx["modes"].items():
                print(f"(b) {m:16s} {v['median_step_ms']:.3f} ms/step  overhead {_fmt_iv(v)}  {v.get('last_run')}")
    save()
    if "trials" in parts:
        work = Path(args.work or (os.path.join(out_env, "overhead_trials") if out_env else "/tmp/overhead_trials"))
        res["trials"] = trials_overhead(work, args.blocks, args.steps, args.skip_steps, args.budget_s,
                                        args.only.split(",") if args.only else None, save)
    save()
    print(rows(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
