# Diagnosis: measures per step and checked findings from the snapshot's tables.


rule diagnose:
    input:
        f"{RESULTS}/{{incident}}/snapshot.json",
        collectives=f"{RESULTS}/{{incident}}/collectives.json",
    output:
        f"{RESULTS}/{{incident}}/diagnosis.json",
    params:
        settings=config.get("diagnose"),
    log:
        f"{RESULTS}/{{incident}}/logs/diagnose.log",
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.diagnose.diagnose_snapshot_file, input[0], STORE, output[0], settings=params.settings, collectives_path=input.collectives)
