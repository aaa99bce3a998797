# Diagnosis: measures per step and checked findings from the snapshot's tables.


rule diagnose:
    input:
        layout.snapshot(RESULTS, "{incident}"),
    output:
        layout.diagnosis(RESULTS, "{incident}"),
    log:
        layout.incident_log(RESULTS, "{incident}", "diagnose.log"),
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.diagnose.diagnose_snapshot_file, input[0], STORE, output[0])
