"""FlightRecorder: keep the moments before a delay, within budgets, and snapshot them.

    rec = FlightRecorder(incident_id="run-7")
    with rec:                       # start() ... stop()
        for i, batch in enumerate(loader):
            with rec.step(i, items=len(batch)):   # workload boundary; feeds the latency trigger
                with rec.span("forward"):
                    ...
        rec.snapshot("workload_boundary")

A step covers the whole iteration. In the loop above the loader's `next()` runs between
two `with rec.step` blocks; a step whose id follows the previous step's id on the same
thread therefore starts where that step ended, and the time before its block is recorded
as a `between_steps` span inside it (for this loop: the data wait). So a step's duration is
the iteration time (start to start), and the diagnosis sees the wait. `for batch in
rec.steps(loader):` does the same explicitly: each step starts before `next()`, which is
timed as a `dataloader.next` span. Steps may declare their work (`items`, `tokens`) so the
trials can compare time per item or per token.

Nothing here raises into the host application once constructed: sources that cannot
start report `not_observed` with the reason, failures are recorded in the manifest's
`recorder.errors`. `STALLCASE_RECORDER=off` makes everything a no-op except the per-step
durations written to `STALLCASE_STEPS_OUT` (the trial runner's contract).

GPU activity has two tiers. With `sources` holding "cupti" and `cupti_mode="triggered"`
(needs a trigger), CUPTI kernel activity is enabled only for the `gpu_window_steps` steps
after the latency trigger fires, and the automatic snapshot waits for that window to close,
so the incident holds the slow step, the armed steps and `sources.cupti.detail.windows`
(which steps had GPU activity). `cupti_mode="always"` keeps CUPTI on all the time.
`cupti_kinds` picks the activity kinds: "kernel" (kernels only, the cheapest useful set),
"default" (kernels, memcpy/memset, runtime API, synchronization) or a tuple of
CuptiSource.KINDS names; `cupti_buffer_bytes` the activity buffer size (docs/benchmarks.md,
"CUPTI buffer parsing": measured); `cupti_parser` "raw" (buffers read as bytes,
sources/cupti_raw.py; the default) or "binding" (cupti-python's record objects).
`STALLCASE_RECORDER_MODE` (recorded in the workload's environment, so a trial arm may set
it) overrides what the program asked for: off | tiered | cupti | nocupti (see MODES).

`rec.pause()` / `rec.resume()` stop and restart recording without stopping anything: the
sampler threads stay alive and skip their samples, CUPTI activity is disabled (and enabled
again on resume if it was on), steps that begin while paused are not recorded, and
`rec.span` returns the no-op span. The edge is a step boundary: a step keeps the state it
began in, so no step is half recorded, and spans a caller looked up before the pause
(and still writes to) are dropped from snapshots by the paused intervals kept in
`recorder.paused`. It is what benchmarks/overhead_inprocess.py switches in windows of K
steps to pair recorder-on with recorder-off inside one warm process.
"""

from __future__ import annotations

import array
import functools
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..core import arrow, atomic
from ..core.incident import check_incident_id, source
from . import provenance
from .budget import Budget, TargetTracker
from .clock import HOST_CLOCK, now_ns, unix_minus_host_ns
from .sources import collectives as collectives_source
from .sources.cupti import CuptiSource, cupti_kinds_of
from .sources.host import HostSource
from .sources.nvml import NvmlSampler
from .sources.sched import SchedSampler
from .trigger import LatencyTrigger
from .types import StepsOut
from . import job, ranks
from . import writer as writer_module
from .writer import Job, SnapshotWriter

KNOWN_SOURCES = ("host", "nvml", "sched", "cupti", "collectives")
STEPS_OUT_ENV = "STALLCASE_STEPS_OUT"
# A directory: each process of a multi-process run writes its own steps-out file there
# (steps_out_name), so the trial runner reads every rank and role of the job.
STEPS_OUT_DIR_ENV = "STALLCASE_STEPS_OUT_DIR"
RECORDER_ENV = "STALLCASE_RECORDER"
INCIDENTS_DIR_ENV = "STALLCASE_INCIDENTS_DIR"
MODE_ENV = "STALLCASE_RECORDER_MODE"
# What each mode does to the recorder the program constructed:
MODES = {
    "off": "recorder off (as STALLCASE_RECORDER=off): only STALLCASE_STEPS_OUT is written",
    "tiered": "always-on layer; CUPTI (if requested) armed by the latency trigger for the next steps",
    "cupti": "CUPTI (added if not requested) always on",
    "nocupti": "always-on layer only: CUPTI left out",
}
CUPTI_MODES = ("always", "triggered")
MAX_PAUSES = 1024  # paused intervals remembered (bounded, like every other record)
SNAPSHOT_WAIT_S = 120.0
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


_NULL_SPAN = _NullSpan()


def _null_lookup(name: str) -> _NullSpan:
    """`rec.span` while paused: one call, records nothing."""
    return _NULL_SPAN


class _Step:
    """`with rec.step(i, items=n)`; `items`/`tokens` may also be set on it inside the block."""

    __slots__ = ("rec", "step_id", "t0", "items", "tokens", "live")

    def __init__(self, rec: "FlightRecorder", step_id: int, items=None, tokens=None):
        self.rec = rec
        self.step_id = step_id
        self.items = items
        self.tokens = tokens

    def __enter__(self):
        # A step keeps the state it began in (see pause()): never half recorded.
        self.live = not self.rec.paused
        self.rec._open = self
        if not self.live:
            return self
        sched = self.rec.sched
        if sched is not None:
            sched.mark_step_start()  # the step's thread brackets its own step (see sched.py)
        self.t0 = now_ns()
        return self

    def __exit__(self, et, ev, tb):
        rec = self.rec
        rec._open = None
        if not self.live:
            if rec._pending is not None:
                rec._apply_pending()
            return False
        rec._end_step(self.step_id, self.t0, now_ns(), items=self.items, tokens=self.tokens, follow=True)
        sched = rec.sched
        if sched is not None:
            sched.mark_current_thread()
            # The next step starts after this sample, so each step stays bracketed by two
            # samples of its thread; the few microseconds of sampling belong to no step.
            rec._last_step.end_ns = now_ns()
        if rec._pending is not None:
            rec._apply_pending()
        return False


class _OpenStep:
    """What `_open` holds for a step of `steps()`: only its state."""

    __slots__ = ("live",)

    def __init__(self, live: bool):
        self.live = live


_LIVE_STEP, _PAUSED_STEP = _OpenStep(True), _OpenStep(False)


def _work(value, batch, what: str):
    """A step's declared work as an int >= 0, or -1 (not declared). Callables get the batch."""
    if value is None:
        return -1
    if callable(value):
        value = value(batch)
    n = int(value)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    return n


class FlightRecorder:
    def __init__(self, incident_id: str | None = None, incidents_dir: str = "incidents", budget: Budget | None = None,
                 sources: tuple[str, ...] = ("host", "nvml", "sched", "collectives"), trigger: LatencyTrigger | None = None,
                 cupti_mode: str = "always", gpu_window_steps: int = 32, mode: str | None = None,
                 cupti_kinds: str | tuple[str, ...] | None = None, cupti_buffer_bytes: int = 0,
                 cupti_parser: str = "raw", role: str | None = None):
        if incident_id is not None:
            check_incident_id(incident_id, "FlightRecorder(incident_id)")
        unknown = [s for s in sources if s not in KNOWN_SOURCES]
        if unknown:
            raise ValueError(f"FlightRecorder: unknown source(s) {unknown}; known: {KNOWN_SOURCES}")
        self.incident_id = incident_id or time.strftime("rec-%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
        # The trial runner points a run's snapshots at that run's own directory, so a rebuilt
        # workload never writes into the incident it was rebuilt from.
        self.incidents_dir = os.environ.get(INCIDENTS_DIR_ENV) or str(incidents_dir)
        self.budget = budget or Budget()
        # The environment (an operator's or a trial arm's override) wins over the program's `mode`.
        mode = os.environ.get(MODE_ENV, "").strip().lower() or (mode or "").strip().lower()
        if mode and mode not in MODES:
            raise ValueError(f"{MODE_ENV} / FlightRecorder(mode)={mode!r}: unknown mode; known: {sorted(MODES)}")
        if cupti_mode not in CUPTI_MODES:
            raise ValueError(f"FlightRecorder(cupti_mode={cupti_mode!r}): known {CUPTI_MODES}")
        if gpu_window_steps < 1:
            raise ValueError("FlightRecorder(gpu_window_steps) must be at least 1")
        sources = tuple(dict.fromkeys(sources))
        if mode == "cupti":
            sources, cupti_mode = tuple(dict.fromkeys(sources + ("cupti",))), "always"
        elif mode == "nocupti":
            sources = tuple(s for s in sources if s != "cupti")
        elif mode == "tiered":
            cupti_mode = "triggered"
        self.mode = mode or None
        self.requested = sources
        self.trigger = trigger
        self.cupti_mode = cupti_mode if "cupti" in sources else None
        self.gpu_window_steps = int(gpu_window_steps)
        self._gpu_left = 0  # armed steps still to record
        self._pending_auto = False  # an automatic snapshot waiting for the armed window to close
        self.enabled = (os.environ.get(RECORDER_ENV, "on").strip().lower() not in ("off", "0", "false", "no")
                        and mode != "off")
        # torchrun and most launchers export RANK; every row then carries it.
        rank = os.environ.get("RANK", "")
        self.rank = int(rank) if rank.isascii() and rank.isdigit() else None
        # Which run of the job this is (ranks merge only within a run) and what this rank does
        # in it (capture/job.py); children this process starts inherit the run id.
        self.role = job.role_of(role)
        self.run = job.run_identity(is_rank=self.rank is not None)
        os.environ.update(job.child_env(self.run))
        self.launcher = job.launcher() if self.rank is not None else None
        self.unix_minus_host_ns, self.unix_uncertainty_ns = unix_minus_host_ns()
        self.errors: list[str] = []
        self.unusual: list[str] = []
        if self.cupti_mode == "triggered" and trigger is None:
            # Nothing would arm it (except arm_gpu()): say so rather than silently record none.
            self.unusual.append("cupti_mode=triggered without a trigger: GPU activity is armed only by arm_gpu()")
        self.dropped_snapshots = 0
        self.failed_snapshots = 0
        self.auto_snapshots = 0
        self._snap_n = itertools.count(1)
        self._inputs: list[str] = []
        self._sources: list[str] = []
        self._running = False
        self.paused = False
        self._pauses: list[list[int | None]] = []  # [start_ns, end_ns or None while paused], host clock
        self._pauses_dropped = 0
        self._cupti_on_at_pause = False
        self._open = None  # the step now open (its .live), so a pause/resume inside it waits for its end
        self._pending = None  # "pause" | "resume" asked inside an open step of the other state
        self._lock = threading.Lock()
        # Per-step durations for the trial runner: preallocated, bounded.
        self._durations = array.array("q", [0]) * self.budget.max_step_durations
        self._items = array.array("q", [-1]) * self.budget.max_step_durations
        self._tokens = array.array("q", [-1]) * self.budget.max_step_durations
        self._last_step = threading.local()  # .id, .end_ns: this thread's previous step
        self._dur_ctr = itertools.count()
        self._steps_seen = 0
        self._reused_step_ids = 0
        owner = {"spans": "host", "steps": "host", "sched": "sched", "nvml": "nvml",
                 "kernels": "cupti", "runtime_api": "cupti", "memcpy": "cupti"}
        rings = tuple(r for r, o in owner.items() if o in self.requested)
        self.host = self.sched = self.nvml = self.cupti = None
        if not self.enabled:
            return
        cap = lambda ring, row: self.budget.capacity(ring, row, rings or ("spans",))
        if "host" in self.requested:
            self.host = HostSource(cap("spans", 32), cap("steps", 56))
            # Bound straight to the host source: one call less on the hot path.
            self.span = self.host.span
        if "sched" in self.requested:
            self.sched = SchedSampler(cap("sched", 56), pid=self._target_pid(), period_s=self.budget.sched_period_s)
        if "nvml" in self.requested:
            self.nvml = NvmlSampler(cap("nvml", 48), self.unix_minus_host_ns)
        if "cupti" in self.requested:
            self.cupti = CuptiSource(cap("kernels", 104), cap("runtime_api", 56), cap("memcpy", 64),
                                     kinds=cupti_kinds_of(cupti_kinds), buffer_bytes=cupti_buffer_bytes,
                                     parser=cupti_parser)
        self.tracker = TargetTracker(self.budget)
        self.writer = SnapshotWriter(self.budget.max_concurrent_writes, housekeeping=self._housekeeping)

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> "FlightRecorder":
        if not self.enabled or self._running:
            return self
        self._running = True
        self.tracker.t0_ns = now_ns()
        for name, src in (("sched", self.sched), ("nvml", self.nvml)):
            if src is not None:
                self._guard(f"starting {name}", src.start)
        if self.cupti is not None:
            self._guard("starting cupti", lambda: self.cupti.start(armed=self.cupti_mode == "always"))
        self._guard("starting writer", self.writer.start)
        return self

    def stop(self) -> None:
        """Stop samplers and the writer (queued snapshots finish); write STALLCASE_STEPS_OUT."""
        if self.enabled and self._running:
            if self.paused:  # close the open paused interval; nothing is re-enabled
                self._end_pause()
            if self._pending_auto:  # the run ended inside an armed window: write what it has
                self._close_gpu_window()
            self._running = False
            for name, src in (("sched", self.sched), ("nvml", self.nvml)):
                if src is not None:
                    self._guard(f"stopping {name}", src.stop)
            self._guard("stopping writer", self.writer.stop)
            if self.cupti is not None:
                self._guard("stopping cupti", self.cupti.stop)
        self._write_steps_out()

    def pause(self) -> None:
        """Stop recording, keep everything running (see the module doc). Cheap: flags, and a
        CUPTI disable when activity is on. Called inside an open step, it takes effect when
        that step ends, so the step is recorded whole (resume() likewise)."""
        if not self.enabled:
            return
        if self._defer("pause"):
            return
        if self.paused:
            return
        self.paused = True
        if self.host is not None:
            self.span = _null_lookup
        for src in (self.sched, self.nvml):
            if src is not None:
                src.paused = True
        self._cupti_on_at_pause = bool(self.cupti is not None and self.cupti.armed)
        if self._cupti_on_at_pause:
            self._guard("pausing cupti", self.cupti.disarm)
        if len(self._pauses) >= MAX_PAUSES:
            self._pauses.pop(0)
            self._pauses_dropped += 1
        self._pauses.append([now_ns(), None])

    def resume(self) -> None:
        """Record again from the next step on; CUPTI activity comes back if it was on."""
        if not self.enabled:
            return
        if self._defer("resume"):
            return
        if not self.paused:
            return
        self._end_pause()
        if self._cupti_on_at_pause and self._running:
            self._guard("resuming cupti", self.cupti.arm)
        self._cupti_on_at_pause = False
        # The first step after a pause does not start where the last step before it ended.
        self._last_step.id = None
        self.paused = False

    def _defer(self, what: str) -> bool:
        """Inside an open step of the other state, `what` waits for that step's end (a step is
        recorded whole or not at all); True when deferred."""
        step = self._open
        if step is not None and step.live == (what == "pause"):
            self._pending = what
            return True
        self._pending = None
        return False

    def _apply_pending(self) -> None:
        what, self._pending = self._pending, None
        (self.pause if what == "pause" else self.resume)()

    def _end_pause(self) -> None:
        if self.host is not None:
            self.span = self.host.span
        for src in (self.sched, self.nvml):
            if src is not None:
                src.paused = False
        if self._pauses and self._pauses[-1][1] is None:
            self._pauses[-1][1] = now_ns()

    def paused_intervals(self, since_ns: int = 0, until_ns: int | None = None) -> list[list[int]]:
        """Paused host-clock intervals clipped to [since, until]; an open one ends at `until`."""
        until_ns = now_ns() if until_ns is None else until_ns
        out = []
        for a, b in list(self._pauses):
            a, b = max(a, since_ns), min(until_ns if b is None else b, until_ns)
            if b > a:
                out.append([int(a), int(b)])
        return out

    def __enter__(self) -> "FlightRecorder":
        return self.start()

    def __exit__(self, et, ev, tb) -> bool:
        self.stop()
        return False

    # ---- hot path ----------------------------------------------------------------------
    def span(self, name: str):
        """`with rec.span("fwd"):` or `@rec.span("fwd")`.

        With the host source on, this method is replaced per instance by the host
        source's lookup (one call less). The object returned for `with` belongs to the
        calling thread (it holds that thread's id and open start time): look it up where it
        is used, as `with rec.span(name):` does. A decorated function may run on any thread.
        """
        if self.host is None:
            return _NULL_SPAN
        return self.host.span(name)

    def step(self, step_id: int, *, items=None, tokens=None) -> _Step:
        """`with rec.step(i):` marks one workload step (and feeds the trigger).

        `items`/`tokens`: the work this step does (ints), when time per item or per token is
        the metric. The step covers the whole iteration: see the module doc."""
        return _Step(self, step_id, items, tokens)

    def steps(self, iterable, *, start: int = 0, items=None, tokens=None):
        """`for batch in rec.steps(loader, items=len):` one step per batch, ids from `start`.

        Each step starts before the loader's `next()` (timed as a `dataloader.next` span) and
        ends when the loop asks for the next batch (or leaves the loop), so the data wait is
        inside the step. `items`/`tokens`: an int, or a function of the batch."""
        it = iter(iterable)
        step_id = int(start)
        while True:
            if self.paused:  # not recorded: see pause()
                try:
                    batch = next(it)
                except StopIteration:
                    return
                self._open = _PAUSED_STEP
                try:
                    yield batch
                finally:
                    self._open = None
                    if self._pending is not None:
                        self._apply_pending()
                step_id += 1
                continue
            sched = self.sched
            if sched is not None:
                sched.mark_step_start()
            t0 = now_ns()
            try:
                with self.span(DATA_WAIT):
                    batch = next(it)
            except StopIteration:
                return
            try:
                n_items, n_tokens = _work(items, batch, "items"), _work(tokens, batch, "tokens")
            except Exception as exc:  # a bad counter must not become the workload's exception
                self._error(f"step {step_id}: counting its work: {type(exc).__name__}: {exc}")
                n_items = n_tokens = -1
            self._open = _LIVE_STEP
            try:
                yield batch
            finally:
                self._open = None
                self._end_step(step_id, t0, now_ns(), items=n_items, tokens=n_tokens)
                if sched is not None:
                    sched.mark_current_thread()
                if self._pending is not None:
                    self._apply_pending()
            step_id += 1

    def _end_step(self, step_id: int, t0: int, t1: int, thread_id: int | None = None, *,
                  items=None, tokens=None, follow: bool = False) -> None:
        """Record a step [t0, t1]. With `follow`, a step whose id follows this thread's previous
        step starts where that one ended, and the gap is a `between_steps` span."""
        gap_from = None
        if follow:
            last = self._last_step
            prev_id = getattr(last, "id", None)
            if prev_id is not None and prev_id + 1 == step_id and last.end_ns <= t0:
                gap_from = last.end_ns
            last.id, last.end_ns = step_id, t1
        elif thread_id is None:
            last = self._last_step
            last.id, last.end_ns = step_id, t1
        start = t0 if gap_from is None else gap_from
        try:
            n_items = -1 if items is None else int(items)
            n_tokens = -1 if tokens is None else int(tokens)
        except (TypeError, ValueError) as exc:
            self._error(f"step {step_id}: items/tokens: {exc}")
            n_items = n_tokens = -1
        k = next(self._dur_ctr)
        if k < len(self._durations):
            self._durations[k] = t1 - start
            self._items[k] = n_items
            self._tokens[k] = n_tokens
        self._steps_seen = k + 1
        if self.host is None:
            return
        try:
            if gap_from is not None:
                self.host.record_span(BETWEEN_STEPS, gap_from, t0)
            self.host.record_step(int(step_id), start, t1, thread_id, n_items, n_tokens)
            if self._gpu_left:
                self._gpu_left -= 1
                if not self._gpu_left:
                    self._close_gpu_window()
            if self.trigger is not None and self.trigger.observe(step_id, t1 - start):
                self.auto_snapshots += 1
                if self.cupti_mode == "triggered" and self.arm_gpu():
                    self._pending_auto = True  # written when the armed window closes
                elif not self._pending_auto:
                    self.snapshot("latency_change", wait=False, automatic=True)
        except Exception as exc:  # a recorder bug must not become the workload's exception
            self._error(f"step {step_id}: {type(exc).__name__}: {exc}")

    def arm_gpu(self, steps: int | None = None) -> bool:
        """Enable CUPTI activity for the next `steps` steps (default gpu_window_steps).
        False when CUPTI is not running or a window is already armed."""
        if self.cupti is None or self._gpu_left or not self.cupti.arm():
            return False
        # +1: the step now beginning started at the triggering step's end, before CUPTI was
        # enabled, so it is only partly covered; the window then holds `steps` whole steps.
        self._gpu_left = int(steps or self.gpu_window_steps) + 1
        return True

    def _close_gpu_window(self) -> None:
        self._gpu_left = 0
        if self.cupti is not None:
            self.cupti.disarm()
        if self._pending_auto:
            self._pending_auto = False
            self.snapshot("latency_change", wait=False, automatic=True)

    # ---- declarations ------------------------------------------------------------------
    def declare_input(self, path: str | os.PathLike) -> None:
        """A file the workload reads; digested at snapshot time."""
        self._inputs.append(os.path.abspath(os.fspath(path)))

    def declare_source(self, path: str | os.PathLike) -> None:
        """A source file of the workload (beyond the main script); digested at snapshot time."""
        self._sources.append(os.path.abspath(os.fspath(path)))

    # ---- snapshots ---------------------------------------------------------------------
    def snapshot(self, reason: str = "workload_boundary", *, wait: bool = True, automatic: bool = False) -> Path | None:
        """Write an incident of the retained window. Returns its directory, or None when
        dropped (budget of concurrent writes) or failed (the error is recorded)."""
        if not self.enabled:
            return None
        try:
            return self._snapshot(str(reason), wait, automatic)
        except Exception as exc:
            self._error(f"snapshot: {type(exc).__name__}: {exc}")
            self.failed_snapshots += 1
            return None

    def _next_path(self, reason: str, automatic: bool) -> Path:
        n = next(self._snap_n)
        base = Path(self.incidents_dir)
        if automatic:  # one rank's own moment: never merged, named per rank
            rank = "" if self.rank is None else f".rank{self.rank}"
            return base / f"{self.incident_id}.{reason}-{n}{rank}"
        if self.rank is not None:  # ranks share the directory: the writer merges (capture/ranks.py)
            return base / (self.incident_id if n == 1 else f"{self.incident_id}.{n}")
        path = base / self.incident_id
        if (path / "manifest.json").exists():
            path = base / f"{self.incident_id}.{n}"
        return path

    def _snapshot(self, reason: str, wait: bool, automatic: bool) -> Path | None:
        # Automatic triggers never wait (excess is dropped and counted); an explicit
        # snapshot that the caller waits for may wait its turn for a write slot.
        if not self.writer.try_reserve(0.0 if (automatic or not wait) else SNAPSHOT_WAIT_S):
            self.dropped_snapshots += 1
            return None
        until = now_ns()
        since = until - self.budget.window_ns
        path = self._next_path(reason, automatic)
        copies = {}
        if self.host is not None:
            copies["spans"], copies["steps"] = self.host.spans.copy(), self.host.steps.copy()
        for name, src in (("sched", self.sched), ("nvml", self.nvml)):
            if src is not None:
                copies[name] = src.ring.copy()
        trig = self.trigger.describe() if (automatic and self.trigger is not None) else None
        write = None
        if self.rank is not None and not automatic:
            write = functools.partial(ranks.write_rank, root_id=self.incident_id, write=writer_module.write_incident_now)
        job = Job(lambda: self._build(path, reason, trig, copies, since, until), write)
        self.writer.submit(job)
        if not wait:
            return path
        if not job.done.wait(SNAPSHOT_WAIT_S):
            self._error(f"snapshot {path.name}: still writing after {SNAPSHOT_WAIT_S:.0f} s")
            return None
        if job.error:
            self.failed_snapshots += 1
            return None
        return job.path or path

    def _build(self, path: Path, reason: str, trig, copies: dict, since: int, until: int):
        """On the writer thread: tables, provenance, manifest."""
        tables, sources = {}, {}
        lo, hi = None, None
        if self.host is not None:
            tables["spans"] = _drop_paused(self.host.spans_table(copies["spans"], since, until),
                                           self.paused_intervals(since, until))
            tables["steps"] = self.host.steps_table(copies["steps"], since, until)
            sources["host"] = source("observed", None, **self._host_detail(copies, tables))
        else:
            sources["host"] = source("not_observed", self._why_not("host"))
        if self.sched is not None:
            tables["sched"] = self.sched.table(copies["sched"], since, until)
            sources["sched"] = self.sched.manifest_entry(copies["sched"])
        else:
            sources["sched"] = source("not_observed", self._why_not("sched"))
        if self.nvml is not None:
            tables["nvml"] = self.nvml.table(copies["nvml"], since, until)
            sources["nvml"] = self.nvml.manifest_entry(copies["nvml"])
        else:
            sources["nvml"] = source("not_observed", self._why_not("nvml"))
        if self.cupti is not None:
            # Flush here, on the writer thread: records of work before `until` arrive now.
            self.cupti.flush()
            cc = self.cupti.copies()
            tables.update(self.cupti.tables(cc, since, until))
            sources["cupti"] = self.cupti.manifest_entry(cc, since, until)
            if "runtime_api" in tables and not self.cupti.thread_ids.startswith("system"):
                tables["runtime_api"], mapped = _native_thread_ids(tables["runtime_api"])
                sources["cupti"]["detail"]["thread_ids"] = mapped
        else:
            sources["cupti"] = source("not_observed", self._why_not("cupti"))
        if "collectives" in self.requested and self.enabled:
            ctable, sources["collectives"] = collectives_source.collect(self.rank, self.unix_minus_host_ns)
            if ctable is not None:
                tables["collectives"] = ctable
        else:
            sources["collectives"] = source("not_observed", self._why_not("collectives"))
        for name, t in tables.items():
            if t.num_rows == 0:
                continue
            col = next((c for c in ("ts_ns", "start_ns") if c in t.column_names), None)
            if col is None:  # clock_sync rows are calibrations, not observations of the window
                continue
            a = int(np.min(arrow.values(t[col])))
            lo = a if lo is None else min(lo, a)
        if self.rank is not None:
            tables = {n: t if "rank" in t.column_names else
                      t.append_column("rank", arrow.numbers(np.full(t.num_rows, self.rank, np.int32), pa.int32()))
                      for n, t in tables.items()}
        if self.role is not None:
            tables = {n: t.append_column("role", pa.array([self.role] * t.num_rows, pa.string()))
                      if "role" not in t.column_names else t for n, t in tables.items()}
        prov, artifacts, workload = self._provenance()
        manifest = {
            "incident_id": path.name,
            "reason": reason,
            "trigger": trig,
            "producer": "recorder",
            "clock": {"host": HOST_CLOCK, "unix_minus_host_ns": self.unix_minus_host_ns},
            "window": {"start_ns": max(0, lo if lo is not None else since), "end_ns": until},
            "sources": sources,
            "ranks": [self.rank] if self.rank is not None else [],
            "provenance": prov,
            "artifacts": artifacts,
            "workload": workload,
            "recorder": self.report(),
            "job": self._run_section(),
        }
        if self.launcher is not None:
            # The job is the launcher's command: the plan rebuilds it whole, never one rank.
            manifest["workload"] = dict(workload, argv=list(self.launcher["argv"]), cwd=os.getcwd())
        if self.producer != "recorder":
            manifest["producer"] = self.producer
        return path, manifest, tables

    # ---- what is recorded about the workload (the sidecar overrides these) ---------------
    producer = "recorder"
    steps_from = {"from": "recorder", "covers": "iteration"}

    def _target_pid(self) -> int:
        return os.getpid()

    def _run_section(self) -> dict:
        """The manifest's `job`: which run of the job this is, its world size, launcher and roles."""
        world = os.environ.get("WORLD_SIZE", "")
        rank = None if self.rank is None else str(self.rank)
        return {"id": self.run.run_id, "id_from": self.run.source,
                "world_size": int(world) if world.isdigit() else None,
                "launcher": self.launcher,
                "roles": {rank: self.role} if rank is not None and self.role is not None else {},
                "rank_argv": {rank: [sys.executable, *sys.argv]} if rank is not None and self.launcher else {},
                "role": self.role}

    def _provenance(self) -> tuple[dict, list[dict], dict]:
        """(provenance, artifacts, workload) of this process; runs on the writer thread."""
        prov, artifacts, perrors = provenance.collect(
            argv=list(sys.argv), cwd=os.getcwd(), executable=sys.executable, sources=list(self._sources),
            inputs=list(self._inputs), in_process=True)
        for e in perrors:
            self._error(f"provenance: {e}")
        argv = [sys.executable, *sys.argv] if sys.argv and sys.argv[0] else [sys.executable]
        return prov, artifacts, {"argv": argv, "cwd": os.getcwd(), "env": provenance.allowed_env()}

    def _why_not(self, name: str) -> str:
        if name not in self.requested:
            return f"not enabled (sources={list(self.requested)})"
        return "recorder off (STALLCASE_RECORDER=off)"

    def _host_detail(self, copies, tables) -> dict:
        return {"spans_written": copies["spans"].written, "spans_overwritten": copies["spans"].overwritten,
                "spans_capacity": self.host.spans.capacity, "steps_written": copies["steps"].written,
                "steps_overwritten": copies["steps"].overwritten, "steps_capacity": self.host.steps.capacity,
                "span_names_over_budget": self.host.names_over_budget,
                "steps_repeated_ids_dropped": self.host.last_repeated_step_ids,
                "depth": "derived from nesting among retained spans of a thread",
                "thread_id": "Linux tid"}

    # ---- budgets, targets, errors ------------------------------------------------------
    def retained_bytes(self) -> int:
        """Bytes of preallocated ring storage (never grows)."""
        return sum(s.nbytes for s in (self.host, self.sched, self.nvml, self.cupti) if s is not None)

    def _housekeeping(self) -> None:
        threads = {"writer": self.writer.native_id} | {n: s.native_id for n, s in (("sched", self.sched), ("nvml", self.nvml)) if s is not None}
        self.tracker.check(threads, self.retained_bytes(), self._back_off)

    def _back_off(self, costliest: str | None = None) -> str | None:
        # Only the thread that costs backs off; the scheduler's periodic all-thread sample is the
        # costly one (its step-boundary marks, which the diagnosis reads, are unaffected), NVML's
        # poll is cheap and is the clock/throttle evidence, so it is never slowed for another's cost.
        src = self.sched if costliest == "sched" else None
        if src is not None and src.back_off():
            return f"sched period -> {src.period_s} s (costliest recorder thread)"
        return None

    def report(self) -> dict:
        """The manifest's `recorder` section."""
        steps_kept = min(self._steps_seen, len(self._durations))
        errors = list(self.errors) + (list(self.writer.errors) if self.enabled else [])
        rep = {
            "enabled": self.enabled,
            "sources_requested": list(self.requested),
            "budgets": {k: v for k, v in self.budget.as_dict().items() if k != "shares"} | {"shares": self.budget.shares},
            "usage": {"retained_bytes": self.retained_bytes() if self.enabled else 0, "steps_seen": self._steps_seen,
                      "step_durations_kept": steps_kept},
            "dropped": {"snapshots": self.dropped_snapshots, "failed_snapshots": self.failed_snapshots,
                        "steps_durations": max(0, self._steps_seen - len(self._durations))},
            "clock": {"unix_minus_host_uncertainty_ns": self.unix_uncertainty_ns},
            "errors": errors,
            "trigger": self.trigger.describe() if self.trigger is not None else None,
            "mode": {"env": self.mode, "cupti_mode": self.cupti_mode, "gpu_window_steps": self.gpu_window_steps},
            # How this incident's steps were made; the plan's `auto` metric reads it (metric.py).
            "steps": dict(self.steps_from),
            # Which span path recorded the spans: "c" (_spanext) or "python" (host.py).
            "span_path": self.host.span_path if self.host is not None else None,
            "paused": {"now": self.paused, "intervals": self.paused_intervals() if self.enabled else [],
                       "intervals_dropped": self._pauses_dropped,
                       "rule": "steps that began while paused are not recorded; spans that began in these "
                               "host-clock intervals are left out of snapshots"},
        }
        if self.enabled:
            rep["targets"] = self.tracker.report()
            rep["dropped"]["snapshot_write_errors"] = self.writer.error_count
        return rep

    def _error(self, msg: str) -> None:
        with self._lock:
            if len(self.errors) < 50:
                self.errors.append(msg)

    def _guard(self, what: str, fn) -> None:
        try:
            fn()
        except Exception as exc:
            self._error(f"{what}: {type(exc).__name__}: {exc}")

    # ---- trial-runner contract ---------------------------------------------------------
    def unusual_events(self) -> list[str]:
        out = list(self.unusual)
        if self.trigger is not None and self.trigger.fired:
            out.append(f"latency trigger fired {self.trigger.fired} time(s); last: {self.trigger.last_fire}")
        if self._steps_seen > len(self._durations):
            out.append(f"step durations truncated: kept first {len(self._durations)} of {self._steps_seen}")
        if self.dropped_snapshots:
            out.append(f"{self.dropped_snapshots} snapshot(s) dropped: concurrent-write budget exhausted")
        if self.enabled:
            rep = self.tracker.report()
            if rep["over_cpu_target_events"]:
                out.append(f"recorder over CPU target {rep['over_cpu_target_events']} time(s): {rep['actions'][-1:] }")
            for name, src in (("sched", self.sched), ("nvml", self.nvml), ("cupti", self.cupti)):
                if src is not None and src.errors:
                    out.append(f"{name} source errors ({len(src.errors)}): {src.errors[0]}")
            for e in list(self.errors) + list(self.writer.errors):
                out.append(e)
        return out

    def steps_out_record(self) -> StepsOut:
        """The STALLCASE_STEPS_OUT record (schemas/steps_out.schema.json)."""
        n = min(self._steps_seen, len(self._durations))

        def work(arr) -> list | None:
            vals = np.frombuffer(arr, dtype=np.int64)[:n]
            if not n or not (vals >= 0).any():
                return None
            return [int(v) if v >= 0 else None for v in vals]

        return StepsOut(covers="iteration", steps_ns=np.frombuffer(self._durations, dtype=np.int64)[:n].tolist(),
                        items=work(self._items), tokens=work(self._tokens), unusual=self.unusual_events(),
                        rank=self.rank, role=self.role, pid=os.getpid())

    def _write_steps_out(self) -> None:
        out_dir = os.environ.get(STEPS_OUT_DIR_ENV)
        dest = os.path.join(out_dir, steps_out_name(self.rank, os.getpid())) if out_dir else os.environ.get(STEPS_OUT_ENV)
        if not dest:
            return
        try:
            from ..core import records

            rec = self.steps_out_record().to_json()
            records.validate(rec, "steps_out", where=f"{STEPS_OUT_ENV}={dest}")
            atomic.write_text(dest, json.dumps(rec, separators=(",", ":")) + "\n")
        except OSError as exc:
            # The trial runner sees the file missing; we must still not raise into the workload.
            self._error(f"writing {STEPS_OUT_ENV}={dest}: {exc.strerror or exc}")
        except Exception as exc:
            self._error(f"writing {STEPS_OUT_ENV}={dest}: {type(exc).__name__}: {exc}")


def _drop_paused(table: pa.Table, intervals: list[list[int]]) -> pa.Table:
    """Rows of `table` whose start_ns lies in no paused interval (a row keeps the state it
    began in, as a step does)."""
    if not intervals or table.num_rows == 0:
        return table
    start = arrow.values(table["start_ns"])
    edges = np.asarray(intervals, np.int64)
    pos = np.searchsorted(edges[:, 0], start, side="right") - 1
    inside = (pos >= 0) & (start < edges[np.maximum(pos, 0), 1])
    return table.filter(pa.array(~inside)) if inside.any() else table


def steps_out_name(rank: int | None, pid: int) -> str:
    """One process's file in STALLCASE_STEPS_OUT_DIR (metric.py reads them all)."""
    return f"steps-rank{rank}-{pid}.json" if rank is not None else f"steps-pid{pid}.json"


def _native_thread_ids(table: pa.Table) -> tuple[pa.Table, dict]:
    """CUPTI names a thread by its pthread id; spans, steps and sched use Linux tids.

    Python's `Thread.ident` is the pthread id and `native_id` the tid, so threads alive at
    snapshot time are mapped; others (threads that ended, or non-Python threads such as
    NCCL's) keep CUPTI's id, and the detail says how many were mapped.
    """
    ident_to_tid = {}
    for t in threading.enumerate():
        if t.ident is not None and t.native_id is not None:
            # CUpti_ActivityAPI.threadId is 32 bits wide: CUPTI keeps the low half of pthread_t.
            ident_to_tid[t.ident] = t.native_id
            ident_to_tid.setdefault(t.ident & 0xFFFFFFFF, t.native_id)
    tids = arrow.values(table["thread_id"])
    uniq = np.unique(tids)
    mapped = {int(u): ident_to_tid[int(u)] for u in uniq if int(u) in ident_to_tid}
    if mapped:
        keys = np.fromiter(mapped.keys(), np.int64)
        vals = np.fromiter(mapped.values(), np.int64)
        order = np.argsort(keys)
        pos = np.searchsorted(keys[order], tids).clip(0, len(keys) - 1)
        hit = keys[order][pos] == tids
        tids = np.where(hit, vals[order][pos], tids)
        table = table.set_column(table.column_names.index("thread_id"), "thread_id", arrow.numbers(tids))
    return table, {"cupti_thread_ids": int(uniq.size), "mapped_to_linux_tid": len(mapped),
                   "rule": "pthread id (Thread.ident) -> Linux tid (Thread.native_id) for threads alive at snapshot"}

