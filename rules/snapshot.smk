# Snapshot: ingest the incident directory into the content-addressed store.


rule snapshot:
    input:
        f"{INCIDENTS}/{{incident}}/manifest.json",
    output:
        layout.snapshot(RESULTS, "{incident}"),
    log:
        layout.incident_log(RESULTS, "{incident}", "snapshot.log"),
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.snapshot.ingest, os.path.dirname(input[0]), STORE, output[0])
