# Diagnosis: measures per step and checked findings from the snapshot's tables.


rule diagnose:
    input:
        layout.snapshot(RESULTS, "{incident}"),
        collectives=layout.collectives(RESULTS, "{incident}"),
    output:
        layout.diagnosis(RESULTS, "{incident}"),
    params:
        settings=config.get("diagnose"),
    log:
        layout.incident_log(RESULTS, "{incident}", "diagnose.log"),
    run:
        rulelog.logged(log[0], workflow_lib.diagnose.diagnose_snapshot_file, input[0], STORE, output[0], settings=params.settings, collectives_path=input.collectives)
