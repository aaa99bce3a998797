"""A diagnosis' steps on disk as they are made, rank by rank, and the record written from there.

A step record is ~9 KB of Python objects (3 KB of JSON): 16 ranks x 3,313 steps held ~480 MiB
until the record was written, and a 1M-step incident would hold ~9 GB (issue 26). Here each
rank's steps are encoded as soon as the rank is diagnosed, into two unnamed temp files (the
line the pretty file will hold, the canonical text the digest is over); the summary and the
next experiments are added up as they go (step_totals with warmup.totals,
next_experiments.totals over the steady-state steps, job.rank_digest for the job summary: rank
by rank gives what all steps at once give). The record keeps its shape: `steps` is a json_pretty.Encoded
array, laid out byte for byte as the list would be, and validated as records.validate validates
a long array: the full schema on the same sample (read back from the spool), every step's
field set against the sample's, every number finite.
"""

from __future__ import annotations

import json
import os
import tempfile

from ..core import json_pretty, records
from ..core.errors import RecordError
from . import job, next_experiments

_KEY = records.SAMPLED_ARRAYS["diagnosis"]


class StepSpool:
    def __init__(self, where: str | os.PathLike):
        self.where = where
        self.n = 0
        self.totals: dict | None = None
        self.experiments = next_experiments.totals([])
        self.job: list[dict | None] = []  # job.rank_digest of each rank: the job summary's input
        self._shapes: dict[frozenset, int] = {}  # field set -> first step holding it
        self._pretty = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")
        self._canon = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")

    def close(self) -> None:
        self._pretty.close()
        self._canon.close()

    def __enter__(self) -> "StepSpool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, steps: list[dict]) -> None:
        """One rank's step records, in record order; they may be dropped once added."""
        from . import step_totals

        for st in steps:
            try:
                # One line each: JSON text escapes newlines; the files split on "\n" only. Both
                # encoders refuse NaN and infinity (allow_nan=False): that is the finite check
                # (a walk of every step's values cost as much as encoding it twice, issue 26).
                pretty, canon = json_pretty._ONE_LINE.encode(st), json_pretty._CANON.encode(st)
            except ValueError as exc:
                if not str(exc).startswith("Out of range float values"):
                    raise
                raise RecordError(self.where, records.NOT_FINITE) from None
            try:
                self._pretty.write(pretty + "\n")
                self._canon.write(canon + "\n")
            except UnicodeEncodeError as exc:
                raise RecordError(self.where, f"record holds text that is not valid Unicode ({exc.reason}: "
                                              f"{exc.object[exc.start:exc.end]!r})") from None
            self._shapes.setdefault(frozenset(st), self.n)
            self.n += 1
        self.totals = step_totals(steps, self.totals)
        next_experiments.totals(steps, self.experiments)
        self.job.append(job.rank_digest(steps))

    def _lines(self, fh):
        fh.flush()
        fh.seek(0)
        for line in fh:
            yield line[:-1]

    def steps(self):
        """The `steps` value: an Encoded array, or the list itself when short (its layout differs)."""
        if self.n > json_pretty.LONG_ARRAY:
            return json_pretty.Encoded(self.n, lambda: self._lines(self._pretty), lambda: self._lines(self._canon))
        return [json.loads(line) for line in self._lines(self._canon)]

    def sample(self) -> tuple[list[dict], list[int]]:
        """(the steps records.validate checks against the full schema, their positions)."""
        idx = records.sample_index(self.n) if self.n > records.SAMPLE_ABOVE else list(range(self.n))
        want, out = set(idx), []
        for i, line in enumerate(self._lines(self._canon)):
            if i in want:
                out.append(json.loads(line))
        return out, idx

    def validate(self, record: dict) -> None:
        """records.validate of `record` as if its steps were the list: sample, shapes, finite."""
        items, idx = self.sample()
        records._check_finite({k: v for k, v in record.items() if k != _KEY}, self.where)
        records.validate(dict(record, **{_KEY: items}), "diagnosis", where=self.where, positions=idx)
        self._check_shapes(items)

    def _check_shapes(self, items: list[dict]) -> None:
        seen = {frozenset(it) for it in items}
        bad = [i for shape, i in self._shapes.items() if shape not in seen]
        if bad:
            raise RecordError(self.where, f"violates diagnosis schema at {_KEY}/{min(bad)}: fields differ from every "
                                          f"validated {_KEY} item")


def write_spooled(path: str | os.PathLike, record: dict, spool: StepSpool) -> str:
    """Validate and write a diagnosis whose steps are in `spool`; returns its digest."""
    spool.validate(record)
    return records.write_validated(path, record)
