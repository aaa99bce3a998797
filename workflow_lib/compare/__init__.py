"""Comparison stage: the plan and every block's execution -> the comparison record.

In: the run's plan.json and execution/<block>.json. Out: comparison.json
(schemas/comparison.schema.json). Run by rule `compare` (rules/compare.smk) through
rule.run; build.py builds the record (types.py Comparison); stats.py and verdict.py hold the
statistics and the decision rule, by_component.py the per-component estimates.
"""
