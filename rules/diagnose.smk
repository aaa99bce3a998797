# Diagnosis: measures per step and checked findings from the snapshot's tables.


rule diagnose:
    input:
        layout.snapshot(RESULTS, "{incident}"),
        collectives=layout.collectives(RESULTS, "{incident}"),
    output:
        layout.diagnosis(RESULTS, "{incident}"),
        # The per-step tables written beside the record (workflow_lib/diagnose/stored.py), the record last.
        steps_table=layout.diagnosis_tables(layout.diagnosis(RESULTS, "{incident}"))["steps"],
        findings_table=layout.diagnosis_tables(layout.diagnosis(RESULTS, "{incident}"))["findings"],
    params:
        settings=config.get("diagnose"),
    log:
        layout.incident_log(RESULTS, "{incident}", "diagnose.log"),
    run:
        rulelog.logged(log[0], workflow_lib.diagnose.rule.run, input[0], STORE, output[0], settings=params.settings, collectives_path=input.collectives)
