"""The report on a loader-starved trainer with a cold first step and pageable copies (issue 25),
without a browser (tests/test_report_first_screen.py has the headless-Chromium twin): the top
next experiment is the loader, the warm-up line appears once, apart from the ranked
experiments, and the timeline draws pageable copies on a marked track of their own."""

import report_cases as RC
from workflow_lib.core import records
from workflow_lib.report import load_records, summary_text, timeline, write_report_files
from workflow_lib.snapshot.build import load_tables


def _results(tmp_path):
    inc = RC.cold_loader_incident(tmp_path / "incidents" / "cold-loader")
    return RC.results_for(inc, tmp_path / "results", trials=False)


def test_first_screen_ranks_the_loader_and_says_warm_up_once(tmp_path):
    p = _results(tmp_path)
    diag = RC.pointed(p["diagnosis"], "diagnosis")
    assert diag["next_experiments"][0]["check"] == "input_starvation"
    assert diag["summary"]["warm_up"]["steps"] == 1
    out = write_report_files(p["snapshot"], p["diagnosis"], None, None, tmp_path / "results",
                             p["snapshot"].parent / "report.html", perfetto=False)
    page = out.read_text(encoding="utf-8")
    glance = page[page.index('<section id="glance">'):page.index("</section>", page.index('<section id="glance">'))]
    assert glance.count('id="glance-warmup"') == 1 and glance.count("once per process") == 1
    assert diag["next_experiments"][0]["candidate_change"] in glance
    # The warm-up comes after the ranked experiment, not as one.
    assert glance.index('id="glance-next"') < glance.index('id="glance-warmup"')
    text = summary_text(load_records(p["snapshot"], p["diagnosis"], None, None))
    lines = text.splitlines()
    assert sum(ln.startswith("warm-up: ") for ln in lines) == 1
    assert "once per process" in next(ln for ln in lines if ln.startswith("warm-up: "))
    assert "(input starvation;" in next(ln for ln in lines if ln.startswith("next experiment: "))


def test_timeline_marks_pageable_copies(tmp_path):
    p = _results(tmp_path)
    snap = records.read_record(p["snapshot"], "snapshot")
    inc = load_tables(snap, tmp_path / "results")
    tl = timeline.build(inc, RC.pointed(p["diagnosis"], "diagnosis"))
    tracks = {t["id"]: t for t in tl["tracks"]}
    pageable = [t for tid, t in tracks.items() if tid.startswith("memcpy-pageable:")]
    assert len(pageable) == 1 and "PAGEABLE" in pageable[0]["label"] and pageable[0]["count"] == 2
    assert pageable[0]["names"] == ["HtoD pageable->device async"]


def test_diagnose_command_says_warm_up_once_after_the_ranked_experiments(tmp_path, capsys):
    from workflow_lib.cli import main

    inc = RC.cold_loader_incident(tmp_path / "incidents" / "cold-loader")
    assert main(["diagnose", str(inc), "-o", str(tmp_path / "diagnosis.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    warm = [i for i, ln in enumerate(lines) if ln.startswith("warm-up: ")]
    ranked = [i for i, ln in enumerate(lines) if ln.startswith("  1. ")]
    assert len(warm) == 1 and "once per process" in lines[warm[0]] and lines[warm[0]].startswith("warm-up: 1.6")
    assert ranked and lines[ranked[0]].startswith("  1. input_starvation") and ranked[0] < warm[0]
