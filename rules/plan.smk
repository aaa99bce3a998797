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
        rulelog.logged(log[0], workflow_lib.plan.build.plan_from_snapshot_file, input[0], STORE, output[0], design=params.design, candidate=params.candidate, experiment=params.experiment, source_repo=params.source_repo)


# results/<incident>/ shows the latest run (links; latest.json says which). Reruns when the run changes.
rule latest:
    input:
        plan=layout.plan(RESULTS, "{incident}", RUN),
        comparison=layout.comparison(RESULTS, "{incident}", RUN),
        report=layout.report(RESULTS, "{incident}", RUN),
    output:
        layout.latest_record(RESULTS, "{incident}"),
    params:
        run=RUN,
    log:
        layout.run_log(RESULTS, "{incident}", RUN, "latest.log"),
    run:
        layout.write_latest(input.plan, RESULTS, wildcards.incident, params.run, log_path=log[0])
