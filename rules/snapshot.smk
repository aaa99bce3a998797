# Snapshot: ingest the incident directory into the content-addressed store.

# Roots the incident's sources and inputs may be read from (docs/security.md): the
# working directory always; the stallcase checkout (the demo workload); the config's allow_roots.
import functools

INGEST = functools.partial(workflow_lib.snapshot.ingest, allow_roots=[workflow.basedir, *config.get("allow_roots", [])])


rule snapshot:
    input:
        f"{INCIDENTS}/{{incident}}/manifest.json",
    output:
        f"{RESULTS}/{{incident}}/snapshot.json",
    log:
        f"{RESULTS}/{{incident}}/logs/snapshot.log",
    run:
        workflow_lib.rulelog.logged(log[0], INGEST, os.path.dirname(input[0]), STORE, output[0])
