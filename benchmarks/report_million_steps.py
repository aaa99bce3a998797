"""The report of a 1M-step diagnosis in headless Chromium, against a 1k-step report (issue 26).

    .venv/bin/python benchmarks/report_million_steps.py [--steps 1000000] [--reference 1000] [--repeats 3]

Builds both diagnoses the way the vectorized diagnosis writes them (benchmarks/million_steps.py:
the two step tables made with NumPy, evidence kept for the 20 slow steps), then, for each:
  load     load_diagnosis: the record, both tables read, digests and every row checked
  build    the report page (load_records + build_report: first screen from the summary,
           slowest steps by row, timeline tracks decimated from the tables' columns)
  paint    first paint and first contentful paint in headless Chromium (the page's own
           performance 'paint' entries), and the timeline drawn (its render-status renderMs)
Prints each with the 1M/1k ratio (the same page code, the same browser, the same run) and the
page's size. Target (issue 26): the 1M-step report opens with first paint < 5 s.

--real: the diagnoses are made by the workflow's own path instead: benchmarks/big_incident.py's
N steps (kernels, runtime API, spans, scheduler, NVML) written as an incident, ingested into a
store, and diagnosed by the `diagnose` rule's entry (diagnose_snapshot_file: above 2,000 steps
all steps of a rank at once, the tables written straight from the columns).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAINT = ("(function(){var o={}; performance.getEntriesByType('paint').forEach(function(e){o[e.name]=e.startTime;});"
         "o.render=parseFloat(document.getElementById('render-status').dataset.renderMs); return o;})()")


REAL = False


def real_case(root: Path, n: int) -> dict:
    """An n-step incident diagnosed as the workflow diagnoses it (snapshot, then the rule's entry)."""
    from benchmarks.big_incident import big_incident
    from workflow_lib.core.incident import write_incident
    from workflow_lib.diagnose import diagnose_snapshot_file
    from workflow_lib.snapshot.build import ingest

    inc = big_incident(n)
    write_incident(root / "incidents" / "big", dict(inc.manifest, incident_id="big"), inc.tables)
    del inc
    results = root / "results"
    ingest(root / "incidents" / "big", results, results / "big" / "snapshot.json")
    diagnose_snapshot_file(results / "big" / "snapshot.json", results, results / "big" / "diagnosis.json")
    return {"snapshot": results / "big" / "snapshot.json", "diagnosis": results / "big" / "diagnosis.json", "store": results}


def one(n: int, root: Path, browser, repeats: int) -> dict:
    from benchmarks.million_steps import million_step_case
    from workflow_lib.diagnose import load_diagnosis
    from workflow_lib.report import build_report, load_records

    t = time.perf_counter()
    p = real_case(root, n) if REAL else million_step_case(root, n)
    made = time.perf_counter() - t
    t = time.perf_counter()
    load_diagnosis(p["diagnosis"])
    loaded = time.perf_counter() - t
    t = time.perf_counter()
    page = build_report(load_records(p["snapshot"], p["diagnosis"]), p["store"])
    built = time.perf_counter() - t
    out = root / "report.html"
    out.write_text(page, encoding="utf-8")
    paints = []
    for _ in range(repeats if browser is not None else 0):  # no browser (a smoke run without Chromium): no paint
        pg, _ = browser.open(out, timeout_s=120)
        try:
            # The paint entries land once the frame is presented, which can be after the
            # page's script reports the drawing done: wait for them (never past 60 s).
            t0 = time.monotonic()
            while pg.eval("performance.getEntriesByType('paint').length") < 2 and time.monotonic() - t0 < 60:
                time.sleep(0.05)
            got = pg.eval(PAINT)
            if pg.errors:
                raise SystemExit(f"{n} steps: the page logged errors: {pg.errors[:3]}")
        finally:
            browser.close_page(pg)
        paints.append(got)
    med = {k: statistics.median(x[k] for x in paints) if paints else math.nan
           for k in ("first-paint", "first-contentful-paint", "render")}
    tables = {f.name: f.stat().st_size for f in p["diagnosis"].parent.glob("diagnosis.*.parquet")}
    return {"steps": n, "make_s": made, "load_s": loaded, "build_s": built, "page_bytes": out.stat().st_size,
            "table_bytes": tables, "paint_ms": med, "paints": paints}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--reference", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--real", action="store_true", help="diagnose big_incident's steps through the rule's entry")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers "
                    "mean nothing (without Chromium on PATH, the page is built but not painted)")
    args = ap.parse_args()
    if args.smoke:
        args.steps, args.reference, args.repeats = 2_000, 200, 1
    global REAL
    REAL = args.real
    from benchmarks.report_browser import Browser, find_chromium

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        browser = None
        if not (args.smoke and find_chromium() is None):
            browser = stack.enter_context(Browser())
        else:
            print("no Chromium on PATH: the pages are built, not painted (smoke run)")
        ref = one(args.reference, Path(tmp) / "ref", browser, args.repeats)
        big = one(args.steps, Path(tmp) / "big", browser, args.repeats)
    for r in (ref, big):
        p = r["paint_ms"]
        print(f"{r['steps']:>9} steps: load {r['load_s']:6.2f} s, report built {r['build_s']:6.2f} s, page {r['page_bytes'] / 1e6:.2f} MB; "
              f"first paint {p['first-paint']:7.1f} ms, first contentful paint {p['first-contentful-paint']:7.1f} ms, "
              f"timeline drawn {p['render']:7.1f} ms (median of {args.repeats})")
    for key, label in (("first-paint", "first paint"), ("first-contentful-paint", "first contentful paint"), ("render", "timeline drawn")):
        print(f"{label}: {big['steps']} / {ref['steps']} steps = {big['paint_ms'][key] / ref['paint_ms'][key]:.2f}x "
              f"({big['paint_ms'][key] / 1000:.2f} s; target < 5 s)")
    print(f"load: {big['load_s'] / ref['load_s']:.0f}x for {big['steps'] // ref['steps']}x the steps; "
          f"report built: {big['build_s'] / ref['build_s']:.0f}x")
    print(json.dumps({"reference": ref, "big": big}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
