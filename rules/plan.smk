# Plan: pin artifacts by digest, resolve the candidate, draw the seeded schedule.


rule plan:
    input:
        f"{RESULTS}/{{incident}}/snapshot.json",
    output:
        f"{RESULTS}/{{incident}}/plan.json",
    params:
        design=config["trials"],
        candidate=CANDIDATE,
        experiment=config.get("experiment"),
        source_repo=config.get("source_repo"),
    log:
        f"{RESULTS}/{{incident}}/logs/plan.log",
    run:
        workflow_lib.rulelog.logged(log[0], workflow_lib.plan.plan_from_snapshot_file, input[0], STORE, output[0], design=params.design, candidate=params.candidate, experiment=params.experiment, source_repo=params.source_repo)
