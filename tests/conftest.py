"""Session-wide fixtures.

`demo_pipeline`: the README's run of the built-in demo (`snakemake --cores 2 --profile
profiles/local`), at small
counts, made once per test session and shared by the tests that read its artifact tree
(end-to-end records, the report in a browser, blocks kept serial on one machine), so the
suite pays for one real workflow run instead of three.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import quiet_machine

REPO = Path(__file__).resolve().parent.parent
DEMO_SMALL = """\
trials:
  blocks: 6
  runs_per_arm: 1
  control_runs: 1
  warmup_runs: 0
  seed: 1
  max_retries: 0
  max_failed_fraction: 0.34
  confidence: 0.95
  run_timeout_s: 120
  metric: {name: step_time, source: recorder_steps, statistic: median, skip_steps: 2, unit: ns}
  record_runs: true
demo:
  args: ["--steps", "12", "--min-ready", "4", "--sync-every", "1"]
"""


@pytest.fixture(scope="session", autouse=True)
def _declared_roots(tmp_path_factory):
    """Tests keep workloads and sources under pytest's temp directory: declare it as a root
    a snapshot may read from, as a user declares their project (docs/security.md)."""
    os.environ["STALLCASE_ALLOW_ROOTS"] = str(tmp_path_factory.getbasetemp())
    yield


# Test modules whose every diagnosis is made on both paths and compared (tests/diagnose_crosscheck.py).
CROSSCHECKED = {"test_diagnose_checks", "test_diagnose_credit_bounds", "test_diagnose_transfer_stall", "test_diagnose_excess",
                "test_diagnose_job", "test_diagnose_sources_agree"}


@pytest.fixture(autouse=True)
def _diagnosis_paths_agree(request, monkeypatch):
    mod = request.module
    if mod.__name__.rsplit(".", 1)[-1] in CROSSCHECKED and hasattr(mod, "diagnose"):
        from tests.diagnose_crosscheck import crosschecked

        monkeypatch.setattr(mod, "diagnose", crosschecked(mod.diagnose))
    yield


@pytest.fixture(scope="session")
def demo_pipeline(tmp_path_factory):
    wd = tmp_path_factory.mktemp("demo-pipeline")
    (wd / "small.yaml").write_text(DEMO_SMALL, encoding="utf-8")
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(wd),
            "--cores", "2", "--profile", str(REPO / "profiles" / "local"), "--configfile", str(REPO / "config" / "config.yaml"), str(wd / "small.yaml"),
            "--config", "incident=demo", f"results_dir={wd / 'results'}", f"incidents_dir={wd / 'incidents'}"]
    # The rebuilt workload imports workflow_lib: from the install, or from this checkout.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(base, cwd=wd, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return SimpleNamespace(workdir=wd, results=wd / "results", demo=wd / "results" / "demo", base=base, env=env,
                           output=proc.stdout + proc.stderr)


# The tests that run one after another on one worker (pyproject's `-n 2`): the end-to-end runs
# (real Snakemake runs, torchrun jobs, SLURM, a browser, a fresh venv) each use both cores and
# several time their own trials, so two at once would measure each other; and every user of the
# session's demo run, which each worker would otherwise make again. By module: a test module with
# one such test sends all of its tests to that worker (its module fixtures are made once).
# (xdist's own `xdist_group` marks do not reach its scheduler under pytest 9: it renames node ids
# through an attribute pytest 9 no longer reads.)
SERIAL_SCOPE = "end_to_end"
SERIAL_MODULE = re.compile(r"pytest\.mark\.(slow|slurm)\b|\bdemo_pipeline\b|\bdef browser\(")


def serial_modules(tests_dir: Path = Path(__file__).resolve().parent) -> frozenset[str]:
    """File names of the test modules whose tests share the serial worker."""
    return frozenset(p.name for p in tests_dir.glob("test_*.py") if SERIAL_MODULE.search(p.read_text(encoding="utf-8")))


# End-to-end modules that time nothing (no floor, no verdict size, no overhead): each is one work
# unit of its own (its module fixtures made once), so the other worker takes them once the unit
# tests are done instead of queueing them behind the timed runs. None uses the session's demo run.
UNTIMED_END_TO_END = frozenset({"test_hardening_e2e.py", "test_hardening_round3.py", "test_results_layout.py",
                                "test_concurrency.py", "test_config_candidate.py", "test_zero_change_e2e.py",
                                "test_diagnose_cpu_contention_e2e.py"})


def scope_of(nodeid: str, serial: frozenset[str]) -> str:
    """The xdist work unit of a test: the serial one, its untimed end-to-end module, or the test alone."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    if module in UNTIMED_END_TO_END:
        return module
    return SERIAL_SCOPE if module in serial else nodeid


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is in the test extra; without it the suite runs in one process
    pass
else:
    def pytest_xdist_make_scheduler(config, log):
        serial = serial_modules()

        class SerialEndToEnd(LoadScopeScheduling):
            """xdist's scope scheduling with the end-to-end modules as one scope (the largest, so
            it starts first) and every other test a scope of its own."""

            def _split_scope(self, nodeid: str) -> str:
                return scope_of(nodeid, serial)

        return SerialEndToEnd(config, log)


def _untracked_in_checkout() -> set[str] | None:
    """Files in this checkout that git neither tracks nor ignores (None outside a git checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
                             capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {line[3:] for line in out.stdout.splitlines() if line.startswith("?? ")}


def _is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config):
    """The quiet-machine lock (tests/quiet_machine.py): the controller of an xdist run makes its
    directory, each worker gets it through its workerinput."""
    if _is_xdist_worker(config):
        quiet_machine.set_lock_dir(config.workerinput.get(quiet_machine.WORKERINPUT_KEY))
    elif getattr(config.option, "numprocesses", None):
        config._stallcase_quiet_dir = tempfile.mkdtemp(prefix="stallcase-quiet-")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """What each timed section waited for and held (tests/quiet_machine.py): what the lock costs."""
    lines = quiet_machine.summary(getattr(config, "_stallcase_quiet_dir", None))
    if lines:
        terminalreporter.section("quiet machine")
        for line in lines:
            terminalreporter.line(line)


def pytest_unconfigure(config):
    path = getattr(config, "_stallcase_quiet_dir", None)
    if path:
        shutil.rmtree(path, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput[quiet_machine.WORKERINPUT_KEY] = getattr(node.config, "_stallcase_quiet_dir", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test outside the serial scope holds the shared side of the quiet-machine lock for its
    whole run, so a timed section of an end-to-end test can have the machine to itself."""
    if not hasattr(item.config, "_stallcase_serial"):
        item.config._stallcase_serial = serial_modules()
    if scope_of(item.nodeid, item.config._stallcase_serial) == SERIAL_SCOPE:
        return (yield)
    with quiet_machine.shared():
        return (yield)


def pytest_sessionstart(session):
    if not _is_xdist_worker(session.config):  # the controller checks the whole run once
        session.config._stallcase_untracked = _untracked_in_checkout()


def pytest_sessionfinish(session, exitstatus):
    """Tests write under pytest's temp directory only: a file that appears in the checkout is
    a stage writing outside its declared places (a relative path resolved against the wrong
    cwd did exactly that once), so the session fails, naming it."""
    before = getattr(session.config, "_stallcase_untracked", None)
    after = _untracked_in_checkout()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        shown = ", ".join(new[:10]) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
        session.config.get_terminal_writer().line(f"stallcase: the tests wrote into the checkout: {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
