# Snapshot: ingest the incident directory into the content-addressed store.

# Roots the incident's sources and inputs may be read from (docs/security.md): the
# working directory always; the stallcase checkout (the demo workload); the config's allow_roots.
import functools

INGEST = functools.partial(workflow_lib.snapshot.build.ingest, allow_roots=[workflow.basedir, *config.get("allow_roots", [])])


rule snapshot:
    input:
        # a missing incident: one line saying where it was looked for and how to make one
        lambda w: workflow_lib.missing_incident.manifest_path(INCIDENTS, w.incident),
    output:
        layout.snapshot(RESULTS, "{incident}"),
    log:
        layout.incident_log(RESULTS, "{incident}", "snapshot.log"),
    run:
        rulelog.logged(log[0], INGEST, os.path.dirname(input[0]), STORE, output[0])
