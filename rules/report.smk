# Report: one self-contained HTML page per incident.


rule report:
    input:
        snapshot=layout.snapshot(RESULTS, "{incident}"),
        diagnosis=layout.diagnosis(RESULTS, "{incident}"),
        diagnosis_steps=layout.diagnosis_tables(layout.diagnosis(RESULTS, "{incident}"))["steps"],
        diagnosis_findings=layout.diagnosis_tables(layout.diagnosis(RESULTS, "{incident}"))["findings"],
        plan=layout.plan(RESULTS, "{incident}", "{run}"),
        comparison=layout.comparison(RESULTS, "{incident}", "{run}"),
    output:
        report(layout.report(RESULTS, "{incident}", "{run}"), category="incident", caption="../docs/report_caption.rst"),
        # Written by rule.run next to the page, which links it (every event, for ui.perfetto.dev).
        trace=layout.trace(RESULTS, "{incident}", "{run}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "report.log"),
    run:
        rulelog.logged(log[0], workflow_lib.report.rule.run, input.snapshot, input.diagnosis, input.plan, input.comparison, STORE, output[0])


# A run that made its comparison is marked (made.json); one whose runs all failed fails here, every
# time the same command runs (a failed job leaves no output), and latest never moves to it.
rule made:
    input:
        comparison=layout.comparison(RESULTS, "{incident}", "{run}"),
    output:
        layout.made(RESULTS, "{incident}", "{run}"),
    log:
        layout.made_log(RESULTS, "{incident}", "{run}"),
    run:
        rulelog.logged(log[0], workflow_lib.report.rule.run_made, input.comparison, wildcards.incident, wildcards.run, output[0])


# results/<incident>/ shows the latest run (links; latest.json says which). Reruns when the run changes.
rule latest:
    input:
        plan=layout.plan(RESULTS, "{incident}", RUN),
        made=layout.made(RESULTS, "{incident}", RUN),
        report=layout.report(RESULTS, "{incident}", RUN),
    output:
        layout.latest_record(RESULTS, "{incident}"),
    params:
        run=RUN,
    log:
        layout.run_log(RESULTS, "{incident}", RUN, "latest.log"),
    run:
        rulelog.logged(log[0], workflow_lib.report.rule.run_latest, input.plan, input.made, RESULTS, wildcards.incident, params.run, log_path=log[0])
