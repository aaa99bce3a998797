# Trials: one block of interleaved A / B / A' runs, one GPU, after its preflight.


rule trials:
    input:
        plan=f"{RESULTS}/{{incident}}/plan.json",
        preflight=f"{RESULTS}/{{incident}}/preflight/{{block}}.json",
    output:
        f"{RESULTS}/{{incident}}/execution/{{block}}.json",
    log:
        f"{RESULTS}/{{incident}}/logs/trials-{{block}}.log",
    group:
        "block"
    resources:
        gpu=1,
    priority: 1  # on one machine a block's runs follow its own preflight, not the next block's
    run:
        workflow_lib.trials.run_block_rule(input.plan, input.preflight, wildcards.block, STORE, f"{RESULTS}/{wildcards.incident}/work/{wildcards.block}", output[0], log_path=log[0])
