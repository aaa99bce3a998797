"""Refresh the report screenshots in docs/img/ (headless Chromium at 1400x900, first screen).

    python tests/make_report_screenshots.py --demo-results DIR   # DIR: results/ of a demo run
                                                                 # (snakemake --config incident=demo)

Writes docs/img/report-demo.png (the demo's first screen), report-h200-demo-ab.png (the demo
pipeline run on an H200, tests/fixtures/h200/demo-ab), report-h200-starved-queue.png (an H200
CUPTI capture, tests/fixtures/capture/starved-queue) and report-h200-starved-queue-step.png
(its timeline zoomed to the slowest step: spans named, findings where they were).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import report_cases as RC  # noqa: E402
from benchmarks.report_browser import Browser  # noqa: E402
from workflow_lib.report import write_report_files  # noqa: E402

IMG = HERE.parent / "docs" / "img"


def _report(p: dict, results: Path) -> Path:
    return write_report_files(p["snapshot"], p["diagnosis"], p["plan"], p["comparison"], results,
                              p["snapshot"].parent / "report.html", perfetto=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo-results", type=Path, required=True, help="results/ directory of a demo workflow run")
    args = ap.parse_args()
    IMG.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Browser(width=1400, height=900) as b:
        tmp = Path(tmp)
        demo = args.demo_results / "demo"
        pages = {"report-demo.png": _report({k: demo / f"{k}.json" for k in ("snapshot", "diagnosis", "plan", "comparison")},
                                            args.demo_results)}
        p = RC.h200_pipeline_records("demo-ab", tmp / "h200")
        pages["report-h200-demo-ab.png"] = _report(p, tmp / "h200")
        inc = RC.h200_capture("starved-queue", tmp / "incidents")
        p = RC.results_for(inc, tmp / "capture", trials=False)
        pages["report-h200-starved-queue.png"] = capture = _report(p, tmp / "capture")
        for name, page_path in pages.items():
            page, _ = b.open(page_path)
            assert page.errors == [], page.errors
            page.screenshot(IMG / name, first_screen=True)
            b.close_page(page)
        page, _ = b.open(capture)
        page.eval("document.querySelector('tr.zoomable').click()")
        page.screenshot(IMG / "report-h200-starved-queue-step.png", "#timeline-wrap")
        assert page.errors == [], page.errors
        b.close_page(page)
    for f in sorted(IMG.glob("report-*.png")):
        print(f"{f.relative_to(HERE.parent)}: {f.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
