"""stallcase: GPU performance incidents as repeatable, statistically honest experiments.

One module (or package) per stage, in data-flow order:
capture -> snapshot -> cas -> diagnose / collectives -> plan -> preflight -> trials -> compare -> report.
`importers` turns traces users already have into the same snapshot tables the recorder writes.
"""

__version__ = "0.1.0"
