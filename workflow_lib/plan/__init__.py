"""Plan stage: the snapshot -> what to run (pinned artifacts, candidate, seeded block schedule).

In: results/<incident>/snapshot.json and the trials config. Out: the run's plan.json (types.py
Plan, schemas/plan.schema.json). Run by rule `plan` (rules/plan.smk) through
rule.run. build.py plans what to run; rebuild.py materializes it on the
trial node (an arm's sources from the store, the run's environment) for preflight and trials;
schedule.py draws the interleaved order, candidate.py resolves the candidate change, metric.py
says what a run's value is (the plan pins it; trials read each run with it).
"""
