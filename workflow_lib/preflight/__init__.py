"""Preflight stage: on the node that runs a block, is this the planned environment?

In: the run's plan.json. Out: preflight/<block>.json (schemas/preflight.schema.json), or the
block is refused (the refused record kept as the rule's logs/preflight-<block>.json). Run by rule
`preflight` (rules/preflight.smk) through rule.run; check.py compares
the node with the plan.
"""
