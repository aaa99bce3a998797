# Trials: one block of interleaved A / B / A' runs, one GPU, after its preflight.


rule trials:
    input:
        plan=layout.plan(RESULTS, "{incident}", "{run}"),
        preflight=layout.preflight(RESULTS, "{incident}", "{run}", "{block}"),
    output:
        layout.execution(RESULTS, "{incident}", "{run}", "{block}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "trials-{block}.log"),
    group:
        "block"
    resources:
        gpu=1,
    params:
        work=lambda w: layout.work(RESULTS, w.incident, w.run, w.block),
    priority: 1  # on one machine a block's runs follow its own preflight, not the next block's
    run:
        rulelog.logged(log[0], workflow_lib.trials.rule.run, input.plan, input.preflight, wildcards.block, STORE, params.work, output[0], log_path=log[0])
