# Collectives: who hung or slowed a multi-rank job, from the snapshot's collectives (before the diagnosis).


rule collectives:
    input:
        f"{RESULTS}/{{incident}}/snapshot.json",
    output:
        f"{RESULTS}/{{incident}}/collectives.json",
    log:
        f"{RESULTS}/{{incident}}/logs/collectives.log",
    run:
        import workflow_lib.collectives.rule

        workflow_lib.rulelog.logged(log[0], workflow_lib.collectives.rule.collectives_snapshot_file, input[0], STORE, output[0])
