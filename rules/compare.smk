# Compare: join every block; a verdict only when the effect clears the A/A noise floor.


rule compare:
    input:
        plan=layout.plan(RESULTS, "{incident}", "{run}"),
        executions=[layout.execution(RESULTS, "{incident}", "{run}", b) for b in BLOCKS],
    output:
        layout.comparison(RESULTS, "{incident}", "{run}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "compare.log"),
    run:
        rulelog.logged(log[0], workflow_lib.compare.rule.run, input.plan, input.executions, output[0])
