"""Domain errors. Each names the file (or flag) and the problem in one line.

Library code raises these; only the CLI's and Snakemake's top-level handlers turn
them into `error: ...` and a non-zero exit. Never `sys.exit` from library code.
"""

from __future__ import annotations

import os


class StallcaseError(Exception):
    """Base error: `where` is a file path or flag name, `problem` says what is wrong."""

    def __init__(self, where: str | os.PathLike | None, problem: str):
        self.where = str(where) if where is not None else None
        self.problem = " ".join(str(problem).split())  # always one line
        super().__init__(self.oneline())

    def oneline(self) -> str:
        return f"{self.where}: {self.problem}" if self.where else self.problem


class RecordError(StallcaseError):
    """A record is missing, unreadable or violates its schema."""


class DigestMismatch(StallcaseError):
    """Content does not match the digest it is stored or recorded under."""


class MissingArtifact(StallcaseError):
    """Artifacts named by a snapshot or plan are neither in the store nor at their path.

    `missing` holds one (role, path, expected_digest) per artifact; the message has one
    line per artifact so a user can see everything that blocks at once. `changed` says, by
    path, what differs about an artifact that is there but not as recorded (its size, its
    digest): that is not a missing file, and the line says so.
    """

    def __init__(self, missing: list[tuple[str, str, str]], changed: dict[str, str] | None = None):
        self.missing = list(missing)
        self.changed = dict(changed or {})
        lines = [f"changed artifact: role={r} path={p}: {self.changed[p]} (expected_digest={d})" if p in self.changed
                 else f"missing artifact: role={r} path={p} expected_digest={d}" for r, p, d in self.missing]
        Exception.__init__(self, "\n".join(lines))
        self.where, self.problem = None, "\n".join(lines)

    def oneline(self) -> str:  # one line per artifact, by design
        return self.problem


class InputError(StallcaseError):
    """A user-supplied input file (trace, dump, table) is malformed or hostile."""


class PreflightBlocked(StallcaseError):
    """The node's environment or artifacts differ from the plan."""
