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

GPU activity has two tiers. With `sources` holding "cupti" and `cupti_mode="triggered"`,
CUPTI activity is enabled only in windows of whole steps: the `gpu_window_steps` steps after
the latency trigger fires (the automatic snapshot waits for that window to close, so the
incident holds the slow step and the armed steps) and short baseline windows of typical steps
(`gpu_baseline_steps`, 0: none); `sources.cupti.detail.windows` and `.steps` say which steps
had GPU activity. With `sources` left at its default, a process that sees a GPU and CUPTI
gets exactly that, with the recorder's own trigger (gpu_arming.py: GPU evidence by default);
`cupti_mode="always"` keeps CUPTI on all the time.
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

The recorder's jobs live beside it: steps.py (the step objects of the hot path), steps_out.py
(the per-step durations for the trial runner), gpu_arming.py (when CUPTI is on: the windows, GPU evidence by default),
snapshot.py (what a snapshot copies and the writer thread builds), backoff.py (what slows
down over the CPU target).
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from pathlib import Path

from ..core.incident import check_incident_id
from . import backoff, job, provenance, snapshot as snapshot_mod, step_core, steps_out
from .budget import Budget, TargetTracker
from .clock import now_ns, unix_minus_host_ns
from . import gpu_arming
from .gpu_arming import GpuArming
from .inprocess import adopt
from .sources.cupti import CuptiSource, cupti_kinds_of
from .sources.host import HostSource
from .sources.nvml import NvmlSampler
from .sources.sched import SchedSampler
from .steps import DATA_WAIT, LIVE_STEP, NULL_SPAN, PAUSED_STEP, Step, null_lookup, work
from .step_core import GATE_MAX
from .trigger import NEVER_NS, LatencyTrigger
from .types import StepsOut
from .writer import SnapshotWriter

KNOWN_SOURCES = ("host", "nvml", "sched", "cupti", "collectives")
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


MAX_AUTO_PATHS = 64  # automatic snapshots remembered for the end-of-run announcement


class FlightRecorder:
    _session = None  # the in-process capture session that owns this recorder (inprocess/session.py)
    inprocess = None  # what that session installed, for the manifest (set at its end)
    workload_override = None  # that session's workload: the whole wrapped command

    def __new__(cls, *args, **kwargs):
        # Under `stallcase record` (in-process), the program's own recorder is the run's: one
        # incident per run, never two (inprocess/adopt.py).
        sess = adopt.current
        if sess is not None and cls is FlightRecorder:
            rec = sess.adopt(args, kwargs)
            if rec is not None:
                return rec
        return super().__new__(cls)

    def __init__(self, incident_id: str | None = None, incidents_dir: str = "incidents", budget: Budget | None = None,
                 sources: tuple[str, ...] | None = None, trigger: LatencyTrigger | None = None,
                 cupti_mode: str = "always", gpu_window_steps: int = 32, mode: str | None = None,
                 cupti_kinds: str | tuple[str, ...] | None = None, cupti_buffer_bytes: int = 0,
                 cupti_parser: str = "raw", role: str | None = None, gpu_baseline_steps: int | None = None):
        if self._session is not None:  # adopted (see __new__): already made
            return
        if incident_id is not None:
            check_incident_id(incident_id, "FlightRecorder(incident_id)")
        # No sources named: the default, with GPU evidence in windows where there is a GPU
        # and CUPTI (gpu_arming.py); without either, host, NVML, sched and collectives.
        self.gpu_default = None
        if sources is None:
            sources, added, why = gpu_arming.default_sources(os.environ)
            self.gpu_default = {"cupti_added": added, "why": why}
            if added:
                cupti_mode = "triggered"
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
        if gpu_baseline_steps is not None and not 0 <= gpu_baseline_steps <= gpu_window_steps:
            raise ValueError("FlightRecorder(gpu_baseline_steps) must be between 0 and gpu_window_steps")
        sources = tuple(dict.fromkeys(sources))
        if mode == "cupti":
            sources, cupti_mode = tuple(dict.fromkeys(sources + ("cupti",))), "always"
        elif mode == "nocupti":
            sources = tuple(s for s in sources if s != "cupti")
        elif mode == "tiered":
            cupti_mode = "triggered"
        self.mode = mode or None
        self.requested = sources
        self.cupti_mode = cupti_mode if "cupti" in sources else None
        # The recorder's own trigger arms GPU windows and writes no snapshot of its own (the
        # program asked for none); a program's trigger does both.
        self.own_trigger = trigger is None and self.cupti_mode == "triggered" and bool(self.gpu_default)
        self.trigger = LatencyTrigger() if self.own_trigger else trigger
        self.gpu_window_steps = int(gpu_window_steps)
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
        if self.cupti_mode == "triggered" and self.trigger is None:
            # Nothing would arm it (except arm_gpu()): say so rather than silently record none.
            self.unusual.append("cupti_mode=triggered without a trigger: GPU activity is armed only by arm_gpu()")
        self.dropped_snapshots = 0
        self.failed_snapshots = 0
        self.auto_snapshots = 0
        self.auto_snapshots_written: list[tuple[str, str]] = []  # (path, reason), announced at the run's end
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
        self.durations = steps_out.StepDurations(self.budget.max_step_durations)
        self._reused_step_ids = 0
        owner = {"spans": "host", "steps": "host", "sched": "sched", "nvml": "nvml",
                 "kernels": "cupti", "runtime_api": "cupti", "memcpy": "cupti"}
        rings = tuple(r for r, o in owner.items() if o in self.requested)
        self.host = self.sched = self.nvml = self.cupti = None
        # Baseline windows (typical steps with GPU evidence) wherever CUPTI is windowed.
        # (`gpu_baseline_steps=0`: none; only the latency windows and arm_gpu()).
        baseline = gpu_arming.BASELINE_STEPS if gpu_baseline_steps is None else int(gpu_baseline_steps)
        self.gpu = GpuArming(None, self.gpu_window_steps, baseline if self.cupti_mode == "triggered" else 0)
        # What records a step (step_core.py); with the recorder off, only its duration.
        self._core = step_core.PyStepCore(None, self.durations, None, self._error)
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
            self.gpu.cupti = self.cupti
        self._core = step_core.make(self.host, self.durations, self.sched.marker if self.sched else None, self._error)
        if step_core.path_of(self._core) == "c":
            # An instance attribute shadows step(): `rec.step(i)` makes the C step (steps.py's
            # Step in C), so a recorded step runs no Python frame of the recorder's own.
            self._core.owner = self
            self.step = self._core.step
        self._core_after()
        self.tracker = TargetTracker(self.budget)
        self.writer = SnapshotWriter(self.budget.max_concurrent_writes, housekeeping=lambda: backoff.housekeeping(self))

    @property
    def trigger(self) -> LatencyTrigger | None:
        return self._trigger

    @trigger.setter
    def trigger(self, trigger: LatencyTrigger | None) -> None:
        self._flush_gate()  # the steps that passed belong to the trigger they passed under
        self._trigger = trigger
        self._core_after()

    def _core_after(self) -> None:
        """The step core calls `_after_step` only when there is something to do after a step:
        a trigger to feed, or GPU windows to count (CUPTI present)."""
        core = self.__dict__.get("_core")
        if core is not None:
            core.after = self._after_step if (self._trigger is not None or self.gpu.cupti is not None) else None

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
            if self.cupti_mode == "triggered" and self.gpu.gap_steps:  # baseline windows will come
                self._guard("preparing cupti", self.cupti.prepare)
        self._guard("starting writer", self.writer.start)
        return self

    def stop(self) -> None:
        """Stop samplers and the writer (queued snapshots finish); write STALLCASE_STEPS_OUT."""
        if self._session is not None and self._session.eager:  # the session stops it at the process's exit
            return
        if self.enabled and self._running:
            self._flush_gate()
            if self.paused:  # close the open paused interval; nothing is re-enabled
                self._end_pause()
            if self.gpu.pending_auto:  # the run ended inside an armed window: write what it has
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
        self._flush_gate()
        self.paused = True
        if self.host is not None:
            self.span = null_lookup
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
        self._core.forget_last()
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
            return NULL_SPAN
        return self.host.span(name)

    def step(self, step_id: int, *, items=None, tokens=None) -> Step:
        """`with rec.step(i):` marks one workload step (and feeds the trigger).

        `items`/`tokens`: the work this step does (ints), when time per item or per token is
        the metric. The step covers the whole iteration: see the module doc. With the C step
        path, this method is replaced per instance by the step core's `step` (the same step,
        in C: step_core.py)."""
        return Step(self, step_id, items, tokens)

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
                self._open = PAUSED_STEP
                try:
                    yield batch
                finally:
                    self._open = None
                    if self._pending is not None:
                        self._apply_pending()
                step_id += 1
                continue
            t0 = self._core.start()
            try:
                with self.span(DATA_WAIT):
                    batch = next(it)
            except StopIteration:
                return
            try:
                n_items, n_tokens = work(items, batch, "items"), work(tokens, batch, "tokens")
            except Exception as exc:  # a bad counter must not become the workload's exception
                self._error(f"step {step_id}: counting its work: {type(exc).__name__}: {exc}")
                n_items = n_tokens = -1
            self._open = LIVE_STEP
            try:
                yield batch
            finally:
                self._open = None
                self._core.step_end(step_id, t0, n_items, n_tokens, False)
                if self._pending is not None:
                    self._apply_pending()
            step_id += 1

    def _end_step(self, step_id: int, t0: int, t1: int, thread_id: int | None = None, *,
                  items=None, tokens=None, follow: bool = False) -> None:
        """Record a step [t0, t1] timed elsewhere (the sidecar, in-process capture): the step
        core's rules (step_core.py)."""
        self._core.record(step_id, t0, t1, thread_id, items, tokens, follow)

    def _after_step(self, step_id, t1: int, duration_ns: int, passed: tuple = ()) -> None:
        """After a recorded step (called by the step core only when due, see _core_after and
        step_core.py's gate): the steps the gate let pass, then this step's GPU windows and
        trigger, then the gate for the steps to come."""
        try:
            gpu = self.gpu
            trigger = self._trigger
            if passed:
                self._passed(step_id, t1, passed)
            # A step that began as a window was armed or closed carries that work (enabling
            # activity, parsing the window's records) where no step mark moved its start past
            # it: it is not fed to the trigger, so the windows never set off the trigger.
            perturbed = False
            if gpu.cupti is not None:  # without CUPTI no window is ever armed: nothing to count
                perturbed = gpu.touched
                if gpu.step_ended(t1):
                    self._close_gpu_window(t1)
            if trigger is not None and not perturbed and trigger.observe(step_id, duration_ns):
                armed = self.cupti_mode == "triggered" and self.arm_gpu()
                if not self.own_trigger:
                    self.auto_snapshots += 1
                    if armed:
                        self.gpu.pending_auto = True  # written when the armed window closes
                    elif not self.gpu.pending_auto:
                        self.snapshot("latency_change", wait=False, automatic=True)
            steps, at_ns = gpu.until_event()
            max_ns, steps = trigger.gate(steps) if trigger is not None else (NEVER_NS, steps)
            self._core.gate(max_ns, min(steps, GATE_MAX), at_ns)
        except Exception as exc:  # a recorder bug must not become the workload's exception
            self._error(f"step {step_id}: {type(exc).__name__}: {exc}")

    def _passed(self, step_id, t1: int, passed: tuple) -> None:
        """The steps the gate let pass (step_core.py), counted and fed in order: by the gate's
        bounds none of them closes or arms a GPU window or fires the trigger."""
        if self.gpu.cupti is not None:
            self.gpu.passed(len(passed), t1)
        trigger = self._trigger
        if trigger is not None:
            for d in passed:
                if trigger.observe(step_id, d):  # the bounds say never: a bug to report
                    self._error(f"step {step_id}: the trigger fired on a step its gate let pass")

    def _flush_gate(self) -> None:
        """Handle the steps that passed the gate now, before something changes what its bounds
        assumed (a window armed or closed from outside, a new trigger, a pause, the end)."""
        core = self.__dict__.get("_core")
        if core is None or core.after is None:
            return
        try:
            passed = core.take()
            if passed:
                self._passed(None, now_ns(), passed)
        except Exception as exc:  # a recorder bug must not become the workload's exception
            self._error(f"the gate's passed steps: {type(exc).__name__}: {exc}")

    def arm_gpu(self, steps: int | None = None) -> bool:
        """Enable CUPTI activity for the next `steps` steps (default gpu_window_steps).
        False when CUPTI is not running or a window is already armed (gpu_arming.py)."""
        self._flush_gate()
        return self.gpu.arm(steps)

    def _close_gpu_window(self, t_ns: int = 0) -> None:
        self._flush_gate()
        if self.gpu.close(t_ns):
            self.snapshot("latency_change", wait=False, automatic=True)

    @property
    def _gpu_left(self) -> int:
        """Armed steps still to record (benchmarks/overhead_inprocess.py reads it)."""
        self._flush_gate()
        return self.gpu.left

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
        if self._session is not None and not automatic:
            # In-process capture: the run's one incident is written at exit, with this reason
            # (a process whose exit the session does not see, a multiprocessing child, writes now).
            if self._session.eager:
                return self._session.snapshot_requested(str(reason))
            self._session.program_wrote = True
        try:
            path = snapshot_mod.take(self, str(reason), wait, automatic)
            if automatic and path is not None and len(self.auto_snapshots_written) < MAX_AUTO_PATHS:
                self.auto_snapshots_written.append((str(path), str(reason)))
            return path
        except Exception as exc:
            self._error(f"snapshot: {type(exc).__name__}: {exc}")
            self.failed_snapshots += 1
            return None

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

    # ---- budgets, targets, errors ------------------------------------------------------
    def retained_bytes(self) -> int:
        """Bytes of preallocated ring storage (never grows)."""
        return sum(s.nbytes for s in (self.host, self.sched, self.nvml, self.cupti) if s is not None)

    def _back_off(self, costliest: str | None = None) -> str | None:
        return backoff.back_off(self.sched, costliest)

    def report(self) -> dict:
        """The manifest's `recorder` section."""
        errors = list(self.errors) + (list(self.writer.errors) if self.enabled else [])
        rep = {
            "enabled": self.enabled,
            "sources_requested": list(self.requested),
            "budgets": {k: v for k, v in self.budget.as_dict().items() if k != "shares"} | {"shares": self.budget.shares},
            "usage": {"retained_bytes": self.retained_bytes() if self.enabled else 0, "steps_seen": self.durations.seen,
                      "step_durations_kept": self.durations.kept},
            "dropped": {"snapshots": self.dropped_snapshots, "failed_snapshots": self.failed_snapshots,
                        "steps_durations": self.durations.dropped},
            "clock": {"unix_minus_host_uncertainty_ns": self.unix_uncertainty_ns},
            "errors": errors,
            "trigger": self.trigger.describe() if self.trigger is not None else None,
            "mode": {"env": self.mode, "cupti_mode": self.cupti_mode, "gpu_window_steps": self.gpu_window_steps},
            # GPU evidence: whether the default added CUPTI and why, and the windows armed.
            "gpu_evidence": {"default": self.gpu_default, "own_trigger": self.own_trigger, **self.gpu.describe()},
            # How this incident's steps were made; the plan's `auto` metric reads it (metric.py).
            "steps": dict(self.steps_from),
            # In-process capture (`stallcase record -- python ...`): the hooks installed.
            "inprocess": self.inprocess,
            # Which span path recorded the spans: "c" (_spanext) or "python" (host.py).
            "span_path": self.host.span_path if self.host is not None else None,
            # Which step path recorded the steps: "c" (_stepext) or "python" (step_core.py).
            "step_path": step_core.path_of(self._core),
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
        if self.durations.dropped:
            out.append(f"step durations truncated: kept first {len(self.durations)} of {self.durations.seen}")
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
        return self.durations.record(self.unusual_events(), self.rank, self.role)

    def _write_steps_out(self) -> None:
        dest = steps_out.destination(self.rank)
        if not dest:
            return
        try:
            steps_out.write(dest, self.steps_out_record())
        except OSError as exc:
            # The trial runner sees the file missing; we must still not raise into the workload.
            self._error(f"writing {steps_out.STEPS_OUT_ENV}={dest}: {exc.strerror or exc}")
        except Exception as exc:
            self._error(f"writing {steps_out.STEPS_OUT_ENV}={dest}: {type(exc).__name__}: {exc}")
