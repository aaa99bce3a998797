"""One process's in-process capture: its recorder, where its steps come from, and its end.

A process records from its start when it is the program the runner started, or a rank its
torchrun started (its parent's pid is in PARENT_ENV: the runner's, or the launcher's, which
puts its own there). Any other process of the run (a multiprocessing child, a compile worker,
a DataLoader worker started by spawn) records only once it steps an optimizer, so helpers that
never train stay unrecorded; a forked child (a DataLoader worker) drops the copy it inherited.

Steps, in this order: the program's own FlightRecorder steps (its recorder is this one: one
incident per run), else optimizer steps (the first optimizer that steps; each step from the
previous step's end to its own, so the loader's wait is inside it), else ProfilerStep#N
regions, else the whole run as one step. The manifest's `recorder.steps` says which.

At exit the process writes its incident (ranks merge into one, capture/ranks.py) and says on
stderr where it is, with every automatic snapshot (a latency change) and why it was taken.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time

from ..clock import now_ns
from ..steps import NULL_SPAN
from . import adopt

CONFIG_ENV = "STALLCASE_INPROCESS"  # JSON: {"incident": id}, set by the runner (capture/run.py)
PARENT_ENV = "STALLCASE_INPROCESS_PARENT"  # pid whose direct children record from their start
# JSON {"argv", "cwd"}: the incident's workload, the whole wrapped command (the trials rerun it
# under the same capture, so their steps are the same kind as the incident's).
WORKLOAD_ENV = "STALLCASE_INPROCESS_WORKLOAD"
PROFILER_STEP = "ProfilerStep#"
STEPS_FROM = {
    "program": "the program's own FlightRecorder steps",
    "optimizer": "optimizer steps (torch's global step hooks): each from the previous step's end to its own",
    "profiler_step": "the program's ProfilerStep#N regions (torch.profiler.profile.step)",
    "process": "the whole run as one step (no optimizer or profiler steps seen): its wall time",
}


class Session:
    def __init__(self, incident: str, eager: bool):
        self.incident = incident
        self.eager = eager
        self.rec = None
        self.started_ns = now_ns()
        self.started_unix = time.time()
        self.first_activity_ns: int | None = None
        self.steps_from: str | None = None
        self.step_owner = None  # the optimizer whose steps are the steps (weakly: by id)
        self.step_id = 0
        self.last_end_ns: int | None = None
        self.installed: list[str] = []
        self.requested_reason: str | None = None
        self.program_wrote = False  # the program's own snapshot, written at once (a non-eager process)
        self.creating = False
        self.finished = False
        self.lock = threading.RLock()
        self.roots = None

    # ---- the recorder ------------------------------------------------------------------
    def recorder(self, args=(), kwargs=None):
        """This process's recorder, made now if it has none (with the program's arguments
        when the program made it)."""
        with self.lock:
            if self.rec is not None or self.finished:
                return self.rec
            from ..recorder import FlightRecorder
            from ..trigger import LatencyTrigger

            kw = dict(kwargs or {})
            asked = kw.pop("incident_id", args[0] if args else None)
            kw.setdefault("trigger", LatencyTrigger())
            self.creating = True
            try:
                rec = FlightRecorder(self.incident, *args[1:], **kw)
            finally:
                self.creating = False
            if asked and asked != self.incident:
                rec.unusual.append(f"the program's FlightRecorder(incident_id={asked!r}) joined the run's incident {self.incident!r}")
            rec._session = self
            try:
                rec.workload_override = json.loads(os.environ.get(WORKLOAD_ENV) or "null")
            except ValueError:
                rec.workload_override = None
            self._rank_from_torch(rec)
            rec.start()
            self.rec = rec
            return rec

    def _rank_from_torch(self, rec) -> None:
        """mp.spawn-style jobs give init_process_group a rank without RANK in the environment."""
        if rec.rank is not None:
            return
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                rec.rank = int(dist.get_rank())
        except Exception:
            pass

    def adopt(self, args, kwargs):
        """FlightRecorder(...) called by the program: the run's recorder (None: make a new one)."""
        if self.creating or self.finished:
            return None
        rec = self.recorder(args, kwargs)
        if rec is not None:
            self.steps_from = "program"
            extra = sorted(k for k in (kwargs or {}) if k not in ("incident_id", "incidents_dir"))
            if extra and rec.inprocess is None and self.eager:
                rec.unusual.append(f"the program's FlightRecorder arguments {extra} were not applied: "
                                   f"the run's recorder was recording from the process's start")
        return rec

    def host(self):
        rec = self.rec
        return None if rec is None or rec.paused else rec.host

    def span(self, name: str):
        rec = self.rec
        return NULL_SPAN if rec is None else rec.span(name)

    # ---- what the hooks report -----------------------------------------------------------
    def activity(self, t_ns: int) -> None:
        if self.first_activity_ns is None:
            self.first_activity_ns = t_ns

    def optimizer_step(self, opt, t1: int) -> None:
        rec = self.rec
        if rec is None:
            if self.finished:
                return
            rec = self.recorder()
        if rec is None:
            return
        # With the recorder off (a trial run that is not recorded: STALLCASE_RECORDER=off) there
        # are no spans, but the steps still time the run (the steps-out file).
        if self.steps_from not in (None, "optimizer"):
            return  # the program's own steps, or ProfilerStep steps already begun: never two kinds
        if self.step_owner is None:
            self.step_owner = id(opt)
            if self.roots is not None:
                n = self.roots.hook_roots()
                self.installed.append(f"forward spans on {n} root module(s)")
        if id(opt) != self.step_owner:
            return  # a second optimizer in the same iteration (a GAN's): a span, not a step
        self.steps_from = "optimizer"
        self._end_step(rec, t1)

    def named_region(self, name: str, t0: int, t1: int) -> None:
        host = self.host()
        if host is None and not name.startswith(PROFILER_STEP):
            return
        from .torch_hooks import TORCH_OWN_NAMES

        if host is not None and not name.startswith(TORCH_OWN_NAMES):
            host.record_span(name, t0, t1)
        if name.startswith(PROFILER_STEP) and self.steps_from in (None, "profiler_step"):
            rec = self.rec or self.recorder()
            if rec is not None:
                self.steps_from = "profiler_step"
                self.last_end_ns = t0 if self.last_end_ns is None else self.last_end_ns
                self._end_step(rec, t1)

    def _end_step(self, rec, t1: int) -> None:
        start = self.last_end_ns
        if start is None:
            start = self.first_activity_ns if self.first_activity_ns is not None else self.started_ns
        rec._end_step(self.step_id, start, t1)
        if rec.sched is not None:
            rec.sched.mark_current_thread()
        self.step_id += 1
        self.last_end_ns = t1

    # ---- the end -------------------------------------------------------------------------
    def snapshot_requested(self, reason: str):
        """The program's rec.snapshot(): its one incident is written at exit, with this reason."""
        self.requested_reason = reason
        rec = self.rec
        return None if rec is None else os.path.join(rec.incidents_dir, self.incident)

    def finish(self) -> None:
        with self.lock:
            if self.finished:
                return
            self.finished = True
            rec = self.rec
        if rec is None:
            return
        if self.steps_from is None and self._written_by_others(rec):
            # This process stepped nothing (a launcher of workers that record themselves): the
            # run's incident is theirs; a second one of this process's wall time would split it.
            rec._session = None
            rec.stop()
            return
        if self.steps_from is None:
            self.steps_from = "process"
            rec._end_step(0, self.started_ns, now_ns())
        if not rec.enabled or self.program_wrote or not rec._running:
            # Recorder off (only the steps-out file), or the program wrote and stopped its own.
            rec._session = None
            rec.stop()
            return
        rec.steps_from = {"from": self.steps_from, "covers": STEPS_FROM[self.steps_from]}
        rec.inprocess = {"hooks": list(self.installed), "eager": self.eager}
        rec._session = None
        path = rec.snapshot(self.requested_reason or "exit", wait=True)
        rec.stop()
        _announce(rec, path)

    def _written_by_others(self, rec) -> bool:
        try:
            return os.stat(os.path.join(rec.incidents_dir, self.incident, "manifest.json")).st_mtime >= self.started_unix - 1
        except OSError:
            return False

    def forked(self) -> None:
        """In a forked child: the parent's recorder is the parent's (its threads are not here)."""
        self.rec = None
        self.eager = False


def _announce(rec, path) -> None:
    """Under the runner, which lists the run's incidents at its end, only a failure is said here."""
    lines = []
    if path is None:
        lines.append(f"stallcase: the incident could not be written: {rec.errors[-1] if rec.errors else 'dropped'}")
    elif not os.environ.get(PARENT_ENV):
        lines.append(f"stallcase: incident {path} ({rec.report()['steps']['from']} steps, {rec.durations.seen} recorded)")
        lines += [f"stallcase: automatic snapshot {p} ({reason})" for p, reason in rec.auto_snapshots_written]
    if not lines:
        return
    try:
        print("\n".join(lines), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def start_from_env() -> Session | None:
    """sitecustomize's entry: open this process's session when the runner asked for one."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw or adopt.current is not None:
        return adopt.current
    from .. import job

    if job.is_launcher(list(getattr(sys, "orig_argv", sys.argv))):
        os.environ[PARENT_ENV] = str(os.getpid())  # its ranks are the program
        return None
    cfg = json.loads(raw)
    parent = os.environ.get(PARENT_ENV, "")
    eager = parent.isdigit() and int(parent) == os.getppid()
    sess = Session(str(cfg["incident"]), eager)
    adopt.current = sess
    from . import gc_hooks, torch_hooks
    from .post_import import when_imported

    if "gc" not in torch_hooks.hooks_off():
        sess.installed += gc_hooks.install(sess)
    sess.roots = torch_hooks.RootModules(sess)
    when_imported("torch", lambda torch: sess.installed.extend(torch_hooks.install(sess, torch)))
    os.register_at_fork(after_in_child=sess.forked)
    atexit.register(sess.finish)
    if eager:
        sess.recorder()
    return sess
