"""The objects of the recorder's hot path: a step (`with rec.step(i)`), the open-step state
of `rec.steps()`, the no-op span, and the span names of a step's input wait.

A step covers the whole iteration (recorder.py's module doc says how); the recorder's step
core (step_core.py) records it, so these objects hold only what one step needs while it is open.
"""

from __future__ import annotations

# Span names of the time a step spends waiting for its input. Both match the diagnosis's
# input-wait patterns (diagnose/types.py DEFAULT_WAIT_PATTERNS): in the README's loop the
# gap between two step blocks is the loader's next().
BETWEEN_STEPS = "between_steps"
DATA_WAIT = "dataloader.next"


class _NullSpan:
    """What span() returns when the recorder is off: costs one call, records nothing."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        return False

    def __call__(self, fn):
        return fn


NULL_SPAN = _NullSpan()


def null_lookup(name: str) -> _NullSpan:
    """`rec.span` while paused: one call, records nothing."""
    return NULL_SPAN


class Step:
    """`with rec.step(i, items=n)`; `items`/`tokens` may also be set on it inside the block.

    The Python step: where the C step path is built, `rec.step` makes its C twin
    (_stepext.Step, the same state and rules) and this class serves the Python path."""

    __slots__ = ("rec", "step_id", "t0", "items", "tokens", "live")

    def __init__(self, rec, step_id: int, items=None, tokens=None):
        self.rec = rec
        self.step_id = step_id
        self.items = items
        self.tokens = tokens

    def __enter__(self):
        # A step keeps the state it began in (see pause()): never half recorded.
        rec = self.rec
        self.live = live = not rec.paused
        rec._open = self
        if live:
            self.t0 = rec._core.start()  # its start mark, then its start time (step_core.py)
        return self

    def __exit__(self, et, ev, tb):
        # The few bytecodes a recorded step runs in Python: the rows are the core's (in C
        # where the extension is built), the trigger and GPU windows are called from there.
        rec = self.rec
        rec._open = None
        if self.live:
            rec._core.step_end(self.step_id, self.t0, self.items, self.tokens)
        if rec._pending is not None:
            rec._apply_pending()
        return False


class OpenStep:
    """What `_open` holds for a step of `steps()`: only its state."""

    __slots__ = ("live",)

    def __init__(self, live: bool):
        self.live = live


LIVE_STEP, PAUSED_STEP = OpenStep(True), OpenStep(False)


def work(value, batch, what: str):
    """A step's declared work as an int >= 0, or -1 (not declared). Callables get the batch."""
    if value is None:
        return -1
    if callable(value):
        value = value(batch)
    n = int(value)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    return n
