# Compare: join every block; a verdict only when the effect clears the A/A noise floor.


rule compare:
    input:
        plan=f"{RESULTS}/{{incident}}/plan.json",
        executions=expand(f"{RESULTS}/{{{{incident}}}}/execution/{{block}}.json", block=BLOCKS),
    output:
        f"{RESULTS}/{{incident}}/comparison.json",
    log:
        f"{RESULTS}/{{incident}}/logs/compare.log",
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.compare.write_comparison, input.plan, input.executions, output[0])
