"""The distribution's version, defined once: `stallcase --version`, `workflow_lib.__version__`, `stallcase.__version__`."""

__version__ = "0.1.0"
