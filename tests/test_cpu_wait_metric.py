"""`trials.metric.cpu_wait: removed`: a step-pattern line loses the time its run waited for a CPU
(plan/metric.py `_less_cpu_wait`, from trials/line_clock.py's note of each line's arrival and the
run's run-queue delay), and the runner notes the lines of a real process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workflow_lib.core.errors import RecordError
from workflow_lib.plan import metric
from workflow_lib.trials import line_clock
from workflow_lib.trials.runner import run_group

PATTERN = r"\| ms/batch +(?P<ms>[0-9.]+) \|"
M = {"name": "step_time", "source": "stdout_steps", "statistic": "median", "unit": "ns", "step_pattern": PATTERN,
     "cpu_wait": "removed"}


def _line(ms: float) -> str:
    return f"| epoch 1 | ms/batch {ms:.2f} | loss 1.0"


def test_each_line_loses_the_share_of_its_span_the_run_waited_for_a_cpu():
    out = "\n".join(["starting", _line(10), _line(10), _line(20), "done", ""])
    # arrival (ns since start), cumulative wait (ns): the first line waited 0 of 10 ms, the second
    # 5 of 10 ms, the third 30 of 40 ms; the other lines are no steps.
    clock = [(1_000_000, 0), (10_000_000, 0), (20_000_000, 5_000_000), (60_000_000, 35_000_000), (61_000_000, 35_000_000)]
    got = metric.read(M, Path("/nonexistent"), out, 10**9, streams=[(out, clock), ("", [])])
    assert got["values_ns"] == pytest.approx([10e6, 5e6, 5e6])
    assert got["source"] == "stdout_steps"


def test_with_the_wait_counted_the_same_lines_keep_their_wall_time():
    out = "\n".join([_line(10), _line(20), ""])
    got = metric.read(dict(M, cpu_wait="counted"), Path("/nonexistent"), out, 10**9,
                      streams=[(out, [(10_000_000, 9_000_000), (30_000_000, 19_000_000)])])
    assert got["values_ns"] == [10e6, 20e6]


def test_more_wait_than_time_between_two_lines_is_refused_not_clipped():
    out = "\n".join([_line(10), ""])
    with pytest.raises(metric.MetricUnreadable, match="several of its threads waited at once"):
        metric.read(M, Path("/nonexistent"), out, 10**9, streams=[(out, [(10_000_000, 15_000_000)])])


def test_an_unread_wait_or_no_clock_is_unreadable_never_the_wall_time():
    out = _line(10) + "\n"
    with pytest.raises(metric.MetricUnreadable, match="could not be read"):
        metric.read(M, Path("/nonexistent"), out, 10**9, streams=[(out, [(10_000_000, -1)])])
    with pytest.raises(metric.MetricUnreadable, match="noted no line"):
        metric.read(M, Path("/nonexistent"), out, 10**9)


def test_the_config_refuses_it_where_there_are_no_lines_to_note():
    with pytest.raises(RecordError, match="trials.metric.cpu_wait"):
        metric.check_config(dict(M, source="process_wall"))
    metric.check_config(dict(M, source="auto"))
    assert "less the run's waits for a CPU" in metric.describe(M)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc")
def test_the_runner_notes_each_line_of_a_real_process_and_its_wait(tmp_path):
    prog = textwrap.dedent("""
        import time
        for i in range(4):
            t = time.perf_counter()
            while time.perf_counter() - t < 0.02:
                pass
            print(f"| epoch 1 | ms/batch {(time.perf_counter() - t) * 1000:.2f} | loss 1.0", flush=True)
    """)
    clocks: dict = {}
    code, out, err = run_group([sys.executable, "-c", prog], str(tmp_path), dict(os.environ), 60, tmp_path, clocks)
    assert code == 0 and out.count("ms/batch") == 4
    walls = [w for w, _ in clocks["stdout"]]
    waits = [q for _, q in clocks["stdout"]]
    assert len(clocks["stdout"]) == 4 and clocks["stderr"] == []
    assert walls == sorted(walls) and walls[0] >= 15_000_000, walls  # each line after ~20 ms of spinning
    assert all(q >= 0 for q in waits) and waits == sorted(waits), waits
    got = metric.read(M, Path("/nonexistent"), out + "\n" + err, 10**9, streams=[(out, clocks["stdout"]), (err, [])])
    assert len(got["values_ns"]) == 4
    # Taking a wait out never adds time: each value is at most what the program printed (no
    # bound on the wall time itself: a loaded machine stretches a 20 ms spin at will).
    printed = [float(x) * 1e6 for x in re.findall(r"ms/batch ([0-9.]+)", out)]
    assert len(printed) == 4
    assert all(0 < v <= p * (1 + 1e-9) for v, p in zip(got["values_ns"], printed)), (got["values_ns"], printed)


def test_a_program_that_prints_without_flush_has_its_lines_noted_when_printed(tmp_path):
    """PyTorch's word_language_model prints its lines without flush: through a pipe, Python
    would hand them over in one burst at exit, and every line would carry the same arrival."""
    prog = textwrap.dedent("""
        import time
        for i in range(4):
            time.sleep(0.05)
            print(f"| epoch 1 | ms/batch 50.00 | loss 1.0")
    """)
    clocks: dict = {}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    code, out, _ = run_group([sys.executable, "-c", prog], str(tmp_path), env, 60, tmp_path, clocks)
    assert code == 0 and out.count("ms/batch") == 4
    walls = [w for w, _ in clocks["stdout"]]
    gaps = [b - a for a, b in zip(walls, walls[1:])]
    assert all(g >= 30_000_000 for g in gaps), walls  # ~50 ms apart, as printed


def test_a_process_tree_sums_its_live_descendants(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert line_clock.tree_wait_ns(os.getpid()) is not None
        assert line_clock.tree_wait_ns(os.getpid()) >= line_clock.tree_wait_ns(child.pid)
    finally:
        child.kill()
        child.wait()
    assert line_clock.tree_wait_ns(2**22 + 12345) is None
