# Snapshot: ingest the incident directory into the content-addressed store.


rule snapshot:
    input:
        f"{INCIDENTS}/{{incident}}/manifest.json",
    output:
        f"{RESULTS}/{{incident}}/snapshot.json",
    log:
        f"{RESULTS}/{{incident}}/logs/snapshot.log",
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.snapshot.ingest, os.path.dirname(input[0]), STORE, output[0],
                                   allow_roots=[workflow.basedir, *config.get("allow_roots", [])])
