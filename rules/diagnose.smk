# Diagnosis: measures per step and checked findings from the snapshot's tables.


rule diagnose:
    input:
        f"{RESULTS}/{{incident}}/snapshot.json",
    output:
        f"{RESULTS}/{{incident}}/diagnosis.json",
    run:
        workflow_lib.diagnose.diagnose_snapshot_file(input[0], STORE, output[0])
