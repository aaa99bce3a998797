# Preflight: first thing in each block's job, on the node that runs it (same group as trials).


rule preflight:
    input:
        layout.plan(RESULTS, "{incident}", "{run}"),
    output:
        layout.preflight(RESULTS, "{incident}", "{run}", "{block}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "preflight-{block}.json"),
    group:
        "block"
    resources:
        gpu=1,  # reads the GPU: never while another block runs on it (one GPU per group job)
    run:
        preflight.run_preflight(input[0], wildcards.block, STORE, output[0], results_dir=layout.incident_dir(RESULTS, wildcards.incident), log_path=log[0])
