"""Subcommands of the `stallcase` CLI; one module each (see workflow_lib/cli.py)."""
