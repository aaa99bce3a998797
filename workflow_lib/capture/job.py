"""Which run of which job a recording process belongs to: run id, role and launcher.

Ranks of one incident id merge only with ranks of their own run (capture/ranks.py). The
run id comes from the launcher when it gives one, else from what the parent passes on,
else it is derived so that every child of one launching process shares it:

1. `TORCHELASTIC_RUN_ID` (torchrun's `--rdzv-id`), with the agent's restart count. torchrun's
   default id is the literal "none", shared by every run, so "none" is not an id: step 4.
2. `SLURM_JOB_ID` + `SLURM_STEP_ID` (one `srun` step is one run).
3. `STALLCASE_RUN_ID`: what a recording parent passes to the processes it starts
   (`FlightRecorder` sets it for its children when the program did not).
4. Derived: for a rank (RANK set), its parent process's pid and start time
   (/proc/<ppid>/stat field 22): the children of one `multiprocessing` parent or of one
   torchrun agent share it, and a rerun has a new parent, so a new id. A process that is
   no rank (a job's main process, a single-process run) is its own run: its own pid and
   start time, which is also what its children derive from their parent.

The role (`FlightRecorder(role="producer")`, else `STALLCASE_ROLE`) names what a rank does
in the job; every table row with a rank carries it.

A rank started by torchrun records the launcher's command as the job's workload: the
agent's argv, read from the parent's /proc cmdline, so the plan rebuilds the whole job
under the same launcher and never one rank alone (`--nproc_per_node` and the rest kept).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

RUN_ID_ENV = "STALLCASE_RUN_ID"
ROLE_ENV = "STALLCASE_ROLE"
# Program names of launchers whose argv is the job (the elastic agent is their process).
TORCH_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


@dataclass(frozen=True)
class RunIdentity:
    run_id: str
    """The run's id, shared by every process of one run of the job."""
    source: str
    """Where it came from: torchelastic | slurm | parent | derived."""


def _start_ticks(pid: int | str) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "r", encoding="utf-8", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def run_identity(environ=None, *, is_rank: bool, pid: int | None = None, ppid: int | None = None) -> RunIdentity:
    """The run this process belongs to (see the module doc for the order)."""
    env = os.environ if environ is None else environ
    elastic = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic.lower() != "none":
        return RunIdentity(f"torchelastic:{elastic}:{env.get('TORCHELASTIC_RESTART_COUNT', '0')}", "torchelastic")
    job, step = env.get("SLURM_JOB_ID", "").strip(), env.get("SLURM_STEP_ID", "").strip()
    if job:
        return RunIdentity(f"slurm:{job}.{step or 'batch'}", "slurm")
    passed = env.get(RUN_ID_ENV, "").strip()
    if passed:
        return RunIdentity(passed, "parent")
    pid = os.getpid() if pid is None else pid
    ppid = os.getppid() if ppid is None else ppid
    host = os.uname().nodename
    if is_rank and ppid > 1 and (ticks := _start_ticks(ppid)) is not None:
        return RunIdentity(f"derived:{host}:{ppid}:{ticks}", "derived")
    return RunIdentity(f"derived:{host}:{pid}:{_start_ticks(pid) or '0'}", "derived")


def role_of(role: str | None, environ=None) -> str | None:
    """The rank's declared role: the program's, else $STALLCASE_ROLE; None when neither."""
    env = os.environ if environ is None else environ
    value = (role if role is not None else env.get(ROLE_ENV, "")).strip()
    if not value:
        return None
    if len(value) > 64 or not all(c.isalnum() or c in "-_." for c in value):
        raise ValueError(f"FlightRecorder(role) / {ROLE_ENV}={value!r}: a role is up to 64 letters, digits, '-', '_' or '.'")
    return value


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a]


def is_launcher(argv: list[str]) -> bool:
    """A torchrun / torch.distributed.run / .launch command (`torchrun ...`, `python -m torch.distributed.run ...`)."""
    for k, a in enumerate(argv[:3]):
        name = os.path.basename(a)
        if name in TORCH_LAUNCHERS or (a == "-m" and k + 1 < len(argv) and argv[k + 1] in TORCH_LAUNCHERS):
            return True
    return False


def launcher(environ=None, *, ppid: int | None = None) -> dict | None:
    """The launcher's command when this process is a rank started by torchrun, else None.

    {"kind": "torchrun", "argv": [...], "pid": agent pid, "nproc_per_node": n | None}."""
    env = os.environ if environ is None else environ
    if "TORCHELASTIC_RUN_ID" not in env and "TORCHELASTIC_RESTART_COUNT" not in env:
        return None
    ppid = os.getppid() if ppid is None else ppid
    argv = _cmdline(ppid)
    if not argv or not is_launcher(argv):
        return None
    return {"kind": "torchrun", "argv": argv, "pid": ppid, "nproc_per_node": nproc_per_node(argv)}


def nproc_per_node(argv: list[str]) -> int | None:
    """`--nproc_per_node N` / `--nproc-per-node=N` of a torchrun argv (None: not given or not a number)."""
    for k, a in enumerate(argv):
        for flag in ("--nproc_per_node", "--nproc-per-node"):
            value = a[len(flag) + 1:] if a.startswith(flag + "=") else (argv[k + 1] if a == flag and k + 1 < len(argv) else None)
            if value is not None:
                return int(value) if value.isdigit() else None
    return None


def child_env(identity: RunIdentity, environ=None) -> dict[str, str]:
    """What a recording parent passes to the processes it starts so they share its run id:
    {STALLCASE_RUN_ID: id} unless the launcher or the program already gave one."""
    env = os.environ if environ is None else environ
    if identity.source in ("torchelastic", "slurm") or env.get(RUN_ID_ENV):
        return {}
    return {RUN_ID_ENV: identity.run_id}
