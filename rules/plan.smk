# Plan: pin artifacts by digest, resolve the candidate, draw the seeded schedule.
# One run directory per plan (layout.run_key): an A/A never overwrites an A/B.


rule plan:
    input:
        layout.snapshot(RESULTS, "{incident}"),
    output:
        layout.plan(RESULTS, "{incident}", "{run}"),
    params:
        design=config["trials"],
        candidate=CANDIDATE,
        experiment=config.get("experiment"),
        source_repo=config.get("source_repo"),
    log:
        layout.run_log(RESULTS, "{incident}", "{run}", "plan.log"),
    run:
        rulelog.logged(log[0], workflow_lib.plan.rule.run, input[0], STORE, output[0], design=params.design, candidate=params.candidate, experiment=params.experiment, source_repo=params.source_repo)

