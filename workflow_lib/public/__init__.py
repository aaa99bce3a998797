"""stallcase: the public Python API, importable as `import stallcase`.

    from stallcase import FlightRecorder          # record your own workload (README "Your own workload")
    stallcase.import_kineto([...], incident_id=...)  # traces you already have -> an incident directory
    stallcase.load_diagnosis("results/<incident>/diagnosis.json")  # any version, one shape
    stallcase.Comparison, stallcase.Plan, ...     # the records, typed (typed.read(path, cls) reads one)

This folder is installed as the top-level package `stallcase` (pyproject.toml's package-dir);
`workflow_lib` stays the implementation and keeps its own names (`workflow_lib.capture.FlightRecorder`).
Names load on first use, so a workload that only records never imports the analysis (pandas,
pyarrow): `import stallcase` costs what `import workflow_lib.capture` costs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from workflow_lib.core.version import __version__

if TYPE_CHECKING:  # the same names, for type checkers and the import graph (docs/import_graph.py)
    from workflow_lib.capture import Budget, FlightRecorder, LatencyTrigger
    from workflow_lib.capture.types import StepsOut
    from workflow_lib.collectives.types import CollectivesRecord
    from workflow_lib.compare.types import Comparison
    from workflow_lib.core.typed import read as read_record
    from workflow_lib.core.types import IncidentManifest, Latest
    from workflow_lib.diagnose.stored import Diagnosis, load_diagnosis
    from workflow_lib.diagnose.types import DiagnosisRecord
    from workflow_lib.importers.kineto import import_kineto
    from workflow_lib.importers.nsys import import_nsys
    from workflow_lib.importers.torch_fr import import_torch_fr
    from workflow_lib.plan.types import Plan
    from workflow_lib.preflight.types import Preflight
    from workflow_lib.snapshot.types import Snapshot
    from workflow_lib.trials.types import Execution

# public name -> (module, name there)
_PUBLIC = {
    # capture: the flight recorder in your own program
    "FlightRecorder": ("workflow_lib.capture", "FlightRecorder"),
    "Budget": ("workflow_lib.capture", "Budget"),
    "LatencyTrigger": ("workflow_lib.capture", "LatencyTrigger"),
    # importers: traces you already have -> an incident directory
    "import_kineto": ("workflow_lib.importers.kineto", "import_kineto"),
    "import_torch_fr": ("workflow_lib.importers.torch_fr", "import_torch_fr"),
    "import_nsys": ("workflow_lib.importers.nsys", "import_nsys"),
    # the diagnosis as readers get it (record and tables, every version)
    "load_diagnosis": ("workflow_lib.diagnose.stored", "load_diagnosis"),
    "Diagnosis": ("workflow_lib.diagnose.stored", "Diagnosis"),
    # the records, one class per kind; read_record(path, cls): validated, older versions upgraded
    "read_record": ("workflow_lib.core.typed", "read"),
    "IncidentManifest": ("workflow_lib.core.types", "IncidentManifest"),
    "Latest": ("workflow_lib.core.types", "Latest"),
    "StepsOut": ("workflow_lib.capture.types", "StepsOut"),
    "Snapshot": ("workflow_lib.snapshot.types", "Snapshot"),
    "CollectivesRecord": ("workflow_lib.collectives.types", "CollectivesRecord"),
    "DiagnosisRecord": ("workflow_lib.diagnose.types", "DiagnosisRecord"),
    "Plan": ("workflow_lib.plan.types", "Plan"),
    "Preflight": ("workflow_lib.preflight.types", "Preflight"),
    "Execution": ("workflow_lib.trials.types", "Execution"),
    "Comparison": ("workflow_lib.compare.types", "Comparison"),
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name in _PUBLIC:
        module, attr = _PUBLIC[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # once: later lookups skip __getattr__
        return value
    raise AttributeError(f"module 'stallcase' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
