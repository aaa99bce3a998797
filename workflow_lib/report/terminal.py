"""What the workflow prints when it ends (the Snakefile's onsuccess and onerror handlers).

On success: the verdict line and the report's path. On error: the first stallcase error of this
run in one line, read from the rule logs (rules log through workflow_lib.core.rulelog, which
writes `error: <file>: <problem>`), with the fix; when that error is rule `made`'s (every run
failed, so no comparison could be made), the verdict, the report's path and a last line saying
why, on the first run and on every rerun of the same command alike. Neither handler raises
anything but the exit status: a summary that fails must not hide the run's own outcome.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

STARTED = time.time()
"""When the Snakefile imported this module: logs older than this belong to an earlier run."""

FIXES = (
    (re.compile(r"out of date and is removed: rerun", re.I),
     "rerun the same command: the stage that stored the object runs again"),
    (re.compile(r"preflight|planned .* observed|differences?", re.I),
     "to run the trials in the changed environment anyway, name it as a new experiment: --config experiment=NAME"),
    (re.compile(r"changed artifact", re.I),
     "the file at that path is not the one recorded: put the recorded one back (or record the incident again), then rerun"),
    (re.compile(r"missing artifact", re.I),
     "restore the file at that path (or record the incident again), then rerun the same command"),
    (re.compile(r"store object (is corrupt|changed)|is not in the store", re.I),
     "run `stallcase verify RESULTS_DIR --repair` (it removes what is corrupt and the records that need it, which "
     "a rerun makes again), then rerun the same command"),
    (re.compile(r"violates \S+ schema", re.I),
     "the file does not match its schema: record or import it again with this version of stallcase"),
    (re.compile(r"no manifest|incident .* not found|manifest\.json", re.I),
     "record the incident first (stallcase record --incident ID -- CMD, or stallcase import ...)"),
)
DEFAULT_FIX = "fix what it names and rerun the same command: finished stages are kept"


def fix_for(message: str) -> str:
    for pattern, fix in FIXES:
        if pattern.search(message):
            return fix
    return DEFAULT_FIX


def success_lines(results_dir, incident: str, run: str | None = None) -> list[str]:
    """The verdict line and where the report is, from the run's own records (`run`: this
    workflow run's directory under runs/, else the latest run's links)."""
    from ..compare.types import Comparison
    from ..core import layout, typed
    from .glance import verdict_line
    from .rule import why_no_comparison

    base = Path(layout.run_dir(str(results_dir), incident, run)) if run else Path(results_dir) / incident
    comparison = base / "comparison.json"
    report = base / "report.html"
    comp = typed.read(comparison, Comparison) if comparison.is_file() else None
    lines = [f"stallcase: {verdict_line(comp, incident)}"]
    why = why_no_comparison(comp) if comp is not None and run else None
    if report.is_file():
        lines.append(f"stallcase: report: {report.resolve()}  (or: stallcase show {incident})")
    if why:
        latest = Path(results_dir) / incident / layout.LATEST
        still = os.readlink(latest).split("/")[-1] if latest.is_symlink() else None
        # The rerun advice comes before the last line, which says why: the same command again
        # fails the same way (rule `made`), so fixing the cause needs the trials forced.
        lines.append("stallcase: after fixing what made the runs fail, run the trials again: "
                     "the same command with --forcerun trials")
        lines.append(f"stallcase: failed: {why}" + (f"; results/{incident}/ still shows run {still}" if still and still != run else ""))
    return lines


def first_error(results_dir, incident: str | None, since: float = STARTED) -> tuple[str, Path] | None:
    """The earliest `error:` line written to a rule log of this run, and that log."""
    if incident:  # the incident's own logs and each run's (layout: results/<incident>/runs/<run>/logs)
        inc = Path(results_dir) / incident
        dirs = [d for d in (inc / "logs", *sorted(inc.glob("runs/*/logs"))) if d.is_dir()]
    else:
        dirs = [Path(results_dir)] if Path(results_dir).is_dir() else []
    if not dirs:
        return None
    found = []
    logs = [p for d in dirs for p in d.rglob("*") if p.is_file()]
    for log in (p for p in logs if p.name.startswith("preflight-") and p.suffix == ".json"):
        got = _blocked_preflight(log, since)  # a blocked preflight keeps its record as its log
        if got is not None:
            found.append(got)
    for log in (p for p in logs if p.suffix == ".log"):
        try:
            st = log.stat()
            if st.st_mtime < since or st.st_size > 1 << 20:  # an earlier run's, or not a rulelog
                continue
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("error: "):
                    found.append((st.st_mtime, line[len("error: "):].strip(), log))
                    break
        except OSError:
            continue
    if not found:
        return None
    _, msg, log = min(found, key=lambda f: f[0])
    return msg, log


def _blocked_preflight(log: Path, since: float) -> tuple[float, str, Path] | None:
    from ..core import typed
    from ..core.errors import StallcaseError
    from ..preflight.check import readable_diff
    from ..preflight.types import Preflight

    try:
        st = log.stat()
        if st.st_mtime < since:
            return None
        rec = typed.read(log, Preflight)
    except (OSError, StallcaseError):
        return None
    if rec.status != "blocked":
        return None
    return st.st_mtime, readable_diff(rec.to_json()).replace("\n", " |"), log


_FAILED_RULE = re.compile(r"^Error in rule (\S+):\s*$")
_RULE_LOG = re.compile(r"^\s+log: (\S+)")


def first_failed_rule(snakemake_log: str | None) -> tuple[str, str | None] | None:
    """(rule, its log) of the first 'Error in rule' in Snakemake's own log, when no stage
    wrote an error line (Snakemake keeps the rule's name and log there, not its message)."""
    if not snakemake_log:
        return None
    try:
        lines = Path(snakemake_log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        m = _FAILED_RULE.match(line)
        if m:
            log = next((lm.group(1) for lm in map(_RULE_LOG.match, lines[i + 1:i + 12]) if lm), None)
            return m.group(1), log
    return None


def error_lines(results_dir, incident: str | None, snakemake_log: str | None = None, run: str | None = None) -> list[str]:
    """The end lines of a failed workflow run. When its first error is that of rule `made` of
    `run` (its runs all failed: no comparison could be made), they are the run's own end lines,
    the last saying why: the same on the first run and on every rerun of the same command."""
    got = first_error(results_dir, incident)
    if got is not None and run and incident and _is_made_log(got[1], results_dir, incident, run):
        return success_lines(results_dir, incident, run)
    if got is None:
        failed = first_failed_rule(snakemake_log)
        if failed is not None:
            rule, log = failed
            return [f"stallcase: error: rule {rule} failed without a stallcase error line"
                    + (f"; its log: {log}" if log else "") + "; Snakemake's message is above"]
        where = f" ({snakemake_log})" if snakemake_log else ""
        return [f"stallcase: the workflow failed before any stage logged an error: see Snakemake's messages above{where}"]
    msg, log = got
    return [f"stallcase: error: {msg}", f"stallcase: fix: {fix_for(msg)}  (log: {log})"]


def _is_made_log(log: Path, results_dir, incident: str, run: str) -> bool:
    from ..core import layout

    return log.resolve() == Path(layout.made_log(str(results_dir), incident, run)).resolve()


def on_success(results_dir, incident: str, run: str | None = None) -> None:
    """The end lines; exit status 1 when the run's comparison could not be made because runs
    failed (the last line says why): a pipeline whose trials all crashed has not succeeded. With
    the workflow's own targets that run ends in on_error (rule `made` fails); this is for a run
    asked for fewer targets (its report, say)."""
    try:
        lines = success_lines(results_dir, incident, run)
    except Exception as exc:  # noqa: BLE001 - the run succeeded; a summary failure must not say otherwise
        lines = [f"stallcase: done; could not summarize the verdict ({exc})"]
    print("\n".join(lines), flush=True)
    if lines[-1].startswith("stallcase: failed: "):
        raise SystemExit(1)  # Snakemake releases its locks on the way out (SystemExit from onsuccess: its exit status)


def on_error(results_dir, incident: str | None, snakemake_log=None, run: str | None = None) -> None:
    if isinstance(snakemake_log, (list, tuple)):  # Snakemake passes its log files as a list
        snakemake_log = str(snakemake_log[0]) if snakemake_log else None
    try:
        lines = error_lines(results_dir, incident, snakemake_log, run)
    except Exception as exc:  # noqa: BLE001 - never mask the workflow's own error
        lines = [f"stallcase: could not read the rule logs ({exc})"]
    print("\n".join(lines), flush=True)
