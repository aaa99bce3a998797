"""stallcase: GPU performance incidents as repeatable, statistically honest experiments.

One module (or package) per stage, in data-flow order:
capture -> snapshot -> cas -> diagnose / collectives -> plan -> preflight -> trials -> compare -> report.
`importers` turns traces users already have into the same snapshot tables the recorder writes.
"""

from .core.version import __version__

__all__ = ["__version__"]
