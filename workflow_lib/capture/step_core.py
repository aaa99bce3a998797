"""A recorded step's rows: the step, the between-steps span before it, its duration for the
trial runner, and the sched marks at its boundaries (recorder.py's module doc says what a step
covers; steps.py holds the open step).

Two paths write the same rows: the C `StepCore` (_stepext.c), where the extension is built
and the recorder has a host source, so that `with rec.step(i):` runs two short Python frames
and one C call at each end; and `PyStepCore` below, the fallback and the rules' reference.
Why C: after a step of GPU work the interpreter's caches are cold, and the twenty-odd Python
frames the step path was (Step, _end_step, record_span, record_step, Ring.append, the sched
marks) cost the H200 transformer loop ~100 us a step (issue 33; docs/benchmarks.md, "The step
path in C"). The rare work stays in Python, called only when due: `after(step_id, t1,
duration, passed)` (the trigger and the GPU windows; None when the recorder has neither), the
launcher scan, the error log.

The gate: even one Python call a step (`after`: the trigger's rolling median, the GPU window
count) cost the H200 loop ~20 us a step (py-spy, 2026-12-04). So `after` says, each time it
runs, which of the coming steps it has nothing to do for (`gate(max_ns, steps, at_ns)`): a
step passes while its duration is at most `max_ns`, it is not the `steps`-th step from now,
it ends before `at_ns` (0: no time limit) and fewer than GATE_MAX steps have passed; the next
call gets the passed steps' durations, in order (`passed`), and handles them first. Every
call opens the gate again (every step calls until `after` sets it), and so does a new `after`.
The bounds are the caller's to get right (recorder.py `_after_step`: a step the trigger could
fire on, or that closes or arms a GPU window, never passes).

The rules, on both paths: with `follow` (the `with rec.step` loop), a step whose id follows
this thread's previous step starts where that one ended and the gap is a `between_steps` span;
a step recorded for another thread (`thread_id`) leaves this thread's previous step alone;
items/tokens are ints or -1 (not declared); nothing raises into the workload (errors go to
`on_error`).
"""

from __future__ import annotations

import threading

from .cext import step as ext
from .clock import now_ns
from .steps import BETWEEN_STEPS

# The most steps the gate lets pass between two calls of `after` (_stepext.c's GATE_MAX).
GATE_MAX = 64


class PyStepCore:
    """The Python step path: the C `StepCore`'s methods, the same rows."""

    def __init__(self, host, durations, marker, on_error):
        self.host, self.durations, self.marker, self.on_error = host, durations, marker, on_error
        self._after = None
        self._gate = (-1, 0, 0)  # open: every step calls `after`
        self._passed: list[int] = []
        self._last = threading.local()  # .id, .end_ns: this thread's previous step

    @property
    def after(self):
        return self._after

    @after.setter
    def after(self, fn) -> None:
        if fn is not None and not callable(fn):
            raise TypeError("after must be callable or None")
        self._after, self._gate, self._passed = fn, (-1, 0, 0), []

    def gate(self, max_ns: int, steps: int, at_ns: int) -> None:
        """Which coming steps pass `after` (the module doc)."""
        self._gate = (int(max_ns), int(steps), int(at_ns))

    def take(self) -> tuple:
        """The passed steps' durations, in order; the gate opens."""
        passed, self._passed, self._gate = tuple(self._passed), [], (-1, 0, 0)
        return passed

    @property
    def gate_state(self) -> tuple[int, int, int, int]:
        return (*self._gate, len(self._passed))

    def _call_after(self, step_id, t1: int, d: int) -> None:
        max_ns, left, at_ns = self._gate
        if d <= max_ns:
            left -= 1
            if left > 0 and not (at_ns and t1 >= at_ns) and len(self._passed) < GATE_MAX:
                self._gate = (max_ns, left, at_ns)
                self._passed.append(d)
                return
        self._after(step_id, t1, d, self.take())

    def start(self) -> int:
        """A step starts: its start mark; returns its start time."""
        if self.marker is not None:
            self.marker.mark_start()  # the step's thread brackets its own step (sched_marks.py)
        return now_ns()

    def step_end(self, step_id, t0: int, items, tokens, follow: bool = True) -> None:
        """The step that started at `t0` (start()) ends now."""
        self.record(step_id, t0, now_ns(), None, items, tokens, follow)
        if self.marker is not None:
            self.marker.mark()
            if follow:
                # The next step starts after this sample, so each step stays bracketed by two
                # samples of its thread; the few microseconds of sampling belong to no step.
                self._last.end_ns = now_ns()

    def record(self, step_id, t0: int, t1: int, thread_id, items, tokens, follow: bool) -> None:
        """A step [t0, t1]; `thread_id` None: the calling thread's."""
        gap_from = None
        last = self._last
        if follow:
            prev_id = getattr(last, "id", None)
            if prev_id is not None and prev_id + 1 == step_id and last.end_ns <= t0:
                gap_from = last.end_ns
            last.id, last.end_ns = step_id, t1
        elif thread_id is None:
            last.id, last.end_ns = step_id, t1
        start = t0 if gap_from is None else gap_from
        try:
            n_items = -1 if items is None else int(items)
            n_tokens = -1 if tokens is None else int(tokens)
        except (TypeError, ValueError) as exc:
            self.on_error(f"step {step_id}: items/tokens: {exc}")
            n_items = n_tokens = -1
        self.durations.add(t1 - start, n_items, n_tokens)
        host = self.host
        if host is None:
            return
        try:
            if gap_from is not None:
                host.record_span(BETWEEN_STEPS, gap_from, t0)
            host.record_step(int(step_id), start, t1, thread_id, n_items, n_tokens)
            if self._after is not None:
                self._call_after(step_id, t1, t1 - start)
        except Exception as exc:  # a recorder bug must not become the workload's exception
            self.on_error(f"step {step_id}: {type(exc).__name__}: {exc}")

    def forget_last(self) -> None:
        """The calling thread's next step follows none (after a pause)."""
        self._last.id = None


def path_of(core) -> str:
    """"python" or "c": which path a step core is."""
    return "python" if isinstance(core, PyStepCore) else "c"


def make(host, durations, marker, on_error, path: str | None = None):
    """The recorder's step core: C where the extension is built and there is a host source
    (and the marker is C too), else Python. `path` "python" or "c" forces one (tests)."""
    use_c = (path or ("c" if ext is not None else "python")) == "c" and host is not None
    if not use_c or not (marker is None or isinstance(marker, ext.Marker)):
        return PyStepCore(host, durations, marker, on_error)
    s, sp, d = host.steps, host.spans, durations
    sc, spc = s.cols, sp.cols
    return ext.StepCore(
        (sc["step_id"], sc["tid"], sc["start_ns"], sc["end_ns"], sc["items"], sc["tokens"], sc["seq"]), s.ctr, s.mask,
        (spc["start_ns"], spc["end_ns"], spc["code"], spc["seq"]), sp.ctr, sp.mask, host.name_id(BETWEEN_STEPS),
        (d.durations, d.items, d.tokens), d.ctr, marker, on_error)
