"""Sidecar: record around any program (any language) without touching its code.

    stallcase record --incident ID [--step-pattern REGEX] [--trigger ...] -- CMD ARGS...

The command runs as an argv list (never through a shell). Around it the sidecar samples
NVML and the child's threads' scheduler state, reads its provenance from /proc (argv,
cwd, executable, mapped libraries), and forwards its stdout/stderr unchanged. Snapshots
are taken on exit, on SIGUSR1 to the sidecar, and when a step-time line (the pattern)
is slower than the latency trigger allows. A step line's end is the moment the line
was read; its start is that minus the printed duration. Without a step pattern the
whole run is one step (the child's start to its exit): the incident then has a per-run
metric, the process wall time, and the manifest (`recorder.steps`) and stderr say so.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..core import bounds
from ..core.config.numbers import TRIGGER_OPTIONS, number
from ..core.errors import InputError, StallcaseError
from ..core.patterns import compile_pattern
from . import provenance
from .budget import Budget
from .clock import now_ns
from .recorder import FlightRecorder
from .trigger import LatencyTrigger
from .workload import scripts_in

DURATION_GROUPS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
TRIGGERS = ("exit", "sigusr1", "latency")
MAPS_RESAMPLE_S = 2.0


def compile_step_pattern(pattern: str, where: str = "--step-pattern") -> tuple[re.Pattern, str]:
    """The regex (linear-time engine: it runs on every line the child prints) and its
    duration group name (one of ns, us, ms, s)."""
    try:
        rx = compile_pattern(pattern, where)
    except InputError as exc:
        raise StallcaseError(where, exc.problem) from None
    units = [g for g in DURATION_GROUPS if g in rx.groupindex]
    if len(units) != 1:
        raise StallcaseError(where, "needs exactly one named duration group: (?P<ms>...), (?P<s>...), (?P<us>...) or (?P<ns>...); "
                                    "optionally (?P<step>...) for the step id")
    return rx, units[0]


def parse_triggers(specs: list[str] | None, where: str = "--trigger") -> tuple[set[str], LatencyTrigger]:
    """`exit`, `sigusr1`, `latency[:k=2,warmup=20,window=64,cooldown=100]`; default all three."""
    kinds, trig = set(), LatencyTrigger()
    for spec in specs or list(TRIGGERS):
        for part in [spec.strip()]:  # one trigger per --trigger (latency options hold commas)
            name, _, args = part.partition(":")
            if name not in TRIGGERS:
                raise StallcaseError(where, f"unknown trigger {name!r}; use {', '.join(TRIGGERS)}")
            kinds.add(name)
            if name == "latency" and args:
                kw = {}
                for item in args.split(","):
                    key, _, val = item.partition("=")
                    if key.strip() not in TRIGGER_OPTIONS:
                        raise StallcaseError(where, f"latency option {key!r} unknown; use {', '.join(TRIGGER_OPTIONS)}")
                    field, spec = TRIGGER_OPTIONS[key.strip()]
                    kw[field] = number(val, f"{where} latency:{key.strip()}", spec)
                trig = LatencyTrigger(**kw)
    return kinds, trig


class SidecarRecorder(FlightRecorder):
    """A FlightRecorder whose workload is a child process."""

    producer = "sidecar"

    def __init__(self, argv: list[str], **kw):
        self.child_argv = list(argv)
        self.child_pid: int | None = None
        self.child_cwd = os.getcwd()
        self.child_exe: str | None = None
        self.child_libs: list[str] = []
        super().__init__(**kw)

    def _target_pid(self) -> int:
        return self.child_pid or os.getpid()

    def attach(self, pid: int) -> None:
        self.child_pid = pid
        if self.sched is not None:
            self.sched.pid = pid
        self.refresh_child_view()

    def refresh_child_view(self) -> None:
        """Read what only a live child can tell: executable and mapped libraries."""
        pid = self.child_pid
        if pid is None:
            return
        try:
            self.child_exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            pass
        libs = provenance.mapped_libraries(pid)
        if libs:
            self.child_libs = libs

    def _provenance(self):
        errors: list[str] = []
        exe = self.child_exe or self.child_argv[0]
        prov, artifacts, perr = provenance.collect(
            argv=self.child_argv, cwd=self.child_cwd, executable=exe, pid=os.getpid(),
            sources=list(self._sources) + scripts_in(self.child_argv, self.child_cwd),
            inputs=list(self._inputs), in_process=False, hash_libraries=False)
        errors += perr
        prov["pid"] = self.child_pid or 0
        prov["libraries"] = len(self.child_libs)
        prov["recorded_by"] = {"argv": list(sys.argv), "python_version": sys.version.split()[0]}
        for lib in self.child_libs:
            try:
                digest, size = provenance.digest_file(lib)
            except OSError as exc:
                errors.append(f"library {lib}: {exc.strerror or exc}")
                continue
            artifacts.append({"role": "library", "path": lib, "relpath": None, "digest": digest, "size": size})
        for e in errors:
            self._error(f"provenance: {e}")
        return prov, artifacts, {"argv": self.child_argv, "cwd": self.child_cwd, "env": provenance.allowed_env()}


@dataclass
class SidecarResult:
    returncode: int
    incidents: list[Path]
    steps: int


# A line longer than this is forwarded (and matched) in pieces: a child that prints 1 GB
# without a newline must not make the sidecar hold it.
MAX_LINE_BYTES = 1 << 20


def _forward(stream, sink, on_line, on_error=None) -> None:
    """Copy the child's output to `sink`, then look at each line. Nothing on_line does may
    stop the copy: the child blocks as soon as its pipe is full and nobody reads it."""
    failed = False
    for line in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
        try:
            sink.write(line)
            sink.flush()
        except (OSError, ValueError):
            pass
        if failed:
            continue
        try:
            on_line(line)
        except Exception as exc:  # noqa: BLE001 - recorded; the pass-through goes on
            failed = on_error is None or on_error(exc)
    stream.close()


def record_command(argv: list[str], *, incident_id: str, incidents_dir: str = "incidents",
                   step_pattern: str | None = None, triggers: list[str] | None = None,
                   budget: Budget | None = None, stdout=None, stderr=None) -> SidecarResult:
    """Run `argv`, record around it, snapshot on the chosen triggers; returns the child's status."""
    if not argv:
        raise StallcaseError("record", "no command given after --")
    rx_unit = compile_step_pattern(step_pattern) if step_pattern else None
    kinds, trig = parse_triggers(triggers)
    rec = SidecarRecorder(argv, incident_id=incident_id, incidents_dir=incidents_dir, budget=budget,
                          sources=("host", "nvml", "sched"), trigger=trig if "latency" in kinds and rx_unit else None)
    if rx_unit is None:
        rec.steps_from = {"from": "process", "covers": "the whole run (process wall time)"}
    else:
        rec.steps_from = {"from": "step_pattern", "step_pattern": step_pattern, "covers": "the printed durations"}
    out_sink = stdout or sys.stdout.buffer
    err_sink = stderr or sys.stderr.buffer
    incidents: list[Path] = []
    step_counter = [0]
    bad_lines = [0]

    def on_error(exc: Exception) -> bool:
        """A reader-thread failure: recorded in the incident; step parsing stops, output flows."""
        rec._error(f"step-line reader stopped: {type(exc).__name__}: {exc}")
        return True
    lock = threading.Lock()

    def on_line(line: bytes) -> None:
        if rx_unit is None:
            return
        rx, unit = rx_unit
        m = rx.search(line.decode("utf-8", "replace"))
        if m is None:
            return
        t1 = now_ns()
        try:  # a 400-digit duration or a '²' step id is not a step: counted, never raised into the reader
            dur = bounds.duration_ns_from(m.group(unit), DURATION_GROUPS[unit], f"step line duration ({unit})", None)
            step = (bounds.decimal_id(m.group("step"), "step line step id", None)
                    if "step" in rx.groupindex and m.group("step") is not None else step_counter[0])
        except InputError as exc:
            bad_lines[0] += 1
            if bad_lines[0] <= 3:
                rec._error(f"output line not read as a step: {exc.problem}")
            return
        with lock:
            step_counter[0] = step + 1
            rec._end_step(step, t1 - max(dur, 0), t1, thread_id=rec.child_pid)

    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=None)
    except OSError as exc:
        raise StallcaseError(argv[0], f"cannot run: {exc.strerror or exc}") from None
    child_start = now_ns()
    if rx_unit is None:
        print("stallcase record: no --step-pattern: the run is recorded as one step (its process wall time); "
              "trials compare whole-run wall times", file=sys.stderr)
    rec.attach(child.pid)
    rec.start()
    usr1 = threading.Event()
    snapshot_failed: str | None = None
    previous = {}

    def on_usr1(signum, frame):
        usr1.set()

    def forward_signal(signum, frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, on_usr1 if "sigusr1" in kinds else signal.SIG_IGN)
        for s in (signal.SIGINT, signal.SIGTERM):
            previous[s] = signal.signal(s, forward_signal)
    readers = [threading.Thread(target=_forward, args=(child.stdout, out_sink, on_line, on_error), daemon=True),
               threading.Thread(target=_forward, args=(child.stderr, err_sink, on_line, on_error), daemon=True)]
    for t in readers:
        t.start()
    try:
        # Libraries are mapped as the child starts: look early and often, then every 2 s.
        maps_every_s = 0.05
        next_maps = now_ns() + int(maps_every_s * 1e9)
        while True:
            try:
                rc = child.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            if usr1.is_set():
                usr1.clear()
                p = rec.snapshot("sigusr1", wait=False, automatic=True)
                if p is not None:
                    incidents.append(p)
            if now_ns() >= next_maps:
                rec.refresh_child_view()
                maps_every_s = min(maps_every_s * 2, MAPS_RESAMPLE_S)
                next_maps = now_ns() + int(maps_every_s * 1e9)
        for t in readers:
            t.join(timeout=10)
        if rx_unit is None:
            rec._end_step(0, child_start, now_ns(), thread_id=child.pid)
            step_counter[0] = 1
        if "exit" in kinds:
            p = rec.snapshot("exit", wait=True)
            if p is not None:
                incidents.append(p)
            else:
                snapshot_failed = rec.errors[-1] if rec.errors else "the snapshot was dropped"
    finally:
        if in_main:
            for s, h in previous.items():
                signal.signal(s, h)
        rec.stop()
    if snapshot_failed is not None:
        # The child ran to its end (status kept below in the message); the incident is what failed.
        raise StallcaseError(incidents_dir, f"could not write the incident on exit ({snapshot_failed}); "
                                            f"the command exited with status {rc}")
    auto = sorted(Path(incidents_dir).glob(f"{incident_id}.latency_change-*"))
    found = sorted({p for p in incidents + auto if (p / "manifest.json").exists()})
    return SidecarResult(returncode=rc if rc >= 0 else 128 - rc, incidents=found, steps=step_counter[0])
