# Collectives: who hung or slowed a multi-rank job, from the snapshot's collectives (before the diagnosis).


rule collectives:
    input:
        layout.snapshot(RESULTS, "{incident}"),
    output:
        layout.collectives(RESULTS, "{incident}"),
    log:
        layout.incident_log(RESULTS, "{incident}", "collectives.log"),
    run:
        rulelog.logged(log[0], workflow_lib.collectives.rule.run, input[0], STORE, output[0])
