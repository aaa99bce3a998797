# Report: one self-contained HTML page per incident.


rule report:
    input:
        snapshot=f"{RESULTS}/{{incident}}/snapshot.json",
        diagnosis=f"{RESULTS}/{{incident}}/diagnosis.json",
        plan=f"{RESULTS}/{{incident}}/plan.json",
        comparison=f"{RESULTS}/{{incident}}/comparison.json",
    output:
        report(f"{RESULTS}/{{incident}}/report.html", category="incident", caption="../docs/report_caption.rst"),
    log:
        f"{RESULTS}/{{incident}}/logs/report.log",
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.report.write_report_files, input.snapshot, input.diagnosis, input.plan, input.comparison, STORE, output[0])
