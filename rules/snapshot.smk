# Snapshot: ingest the incident directory into the content-addressed store.


rule snapshot:
    input:
        # a missing incident: one line saying where it was looked for and how to make one
        lambda w: workflow_lib.missing_incident.manifest_path(INCIDENTS, w.incident),
    output:
        layout.snapshot(RESULTS, "{incident}"),
    params:
        incident_dir=lambda w, input: os.path.dirname(input[0]),
        # Roots the incident's sources and inputs may be read from (docs/security.md): the
        # working directory always; the stallcase checkout (the demo workload); the config's allow_roots.
        allow_roots=[workflow.basedir, *config.get("allow_roots", [])],
    log:
        layout.incident_log(RESULTS, "{incident}", "snapshot.log"),
    run:
        rulelog.logged(log[0], workflow_lib.snapshot.rule.run, params.incident_dir, STORE, output[0], allow_roots=params.allow_roots)
