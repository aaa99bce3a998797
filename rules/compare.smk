# Compare: join every block; a verdict only when the effect clears the A/A noise floor.
# With `trials: {stop: early}` the blocks run in waves: the `look` checkpoint judges each wave
# (workflow_lib/compare/looks.py), and compare asks for the next wave only while a look says go on.


checkpoint look:
    input:
        plan=layout.plan(RESULTS, "{incident}", "{run}"),
        executions=lambda w: workflow_lib.compare.looks.look_inputs(config["trials"], w.wave, _execution(w)),
    output:
        layout.look(RESULTS, "{incident}", "{run}", "{wave}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "look-{wave}.log"),
    run:
        rulelog.logged(log[0], workflow_lib.compare.rule.run_look, input.plan, input.executions, wildcards.wave, output[0])


rule compare:
    input:
        plan=layout.plan(RESULTS, "{incident}", "{run}"),
        executions=_executions,
    output:
        layout.comparison(RESULTS, "{incident}", "{run}"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "compare.log"),
    run:
        rulelog.logged(log[0], workflow_lib.compare.rule.run, input.plan, input.executions, output[0])
