# Preflight: first thing in each block's job, on the node that runs it (same group as trials).


rule preflight:
    input:
        layout.plan(RESULTS, "{incident}", "{run}"),
    output:
        layout.preflight(RESULTS, "{incident}", "{run}", "{block}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "preflight-{block}.log"),
        # only when refused: the whole record, every difference (docs/cluster.md)
        blocked=layout.run_log(RESULTS, "{incident}", "{run}", "preflight-{block}.json"),
    group:
        "block"
    resources:
        gpu=1,  # reads the GPU: never while another block runs on it (one GPU per group job)
    params:
        results_dir=lambda w: layout.incident_dir(RESULTS, w.incident),
    run:
        rulelog.logged(log[0], workflow_lib.preflight.rule.run, input[0], wildcards.block, STORE, output[0], results_dir=params.results_dir, blocked_path=log.blocked)
