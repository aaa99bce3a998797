"""Report stage: one self-contained HTML page per incident, and a plain-text summary.

In: results/<incident>/snapshot.json (its tables read back from the store), diagnosis.json and
its tables, and the run's plan.json, preflight/, execution/ and comparison.json. Out: the run's
report.html and trace.perfetto.json beside it (rule `report`, rules/report.smk, through
rule.run), and results/<incident>/latest.json with the links to the latest run (rule `latest`,
through rule.run_latest). build.py reads the records together and writes the files, model.py
turns them into the view model, html.py and text.py draw it.

Names are imported lazily: `import workflow_lib.report.fmt` should not pay for the page.
"""

from __future__ import annotations

_LAZY = {"write_report_files": "build", "build_report": "build", "load_records": "build",
         "Records": "model", "summary_text": "text"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
