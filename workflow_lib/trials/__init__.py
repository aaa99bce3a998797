"""Trials stage: one block of interleaved A / B / A' runs on one GPU.

In: the run's plan.json (plan/types.py Plan) and the block's preflight record. Out:
execution/<block>.json (types.py Execution, schemas/execution.schema.json). Run by rule
`trials` (rules/trials.smk) through rule.run; block.py runs the block, components.py splits one run's time
per component.
"""
