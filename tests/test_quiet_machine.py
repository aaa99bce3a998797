"""The quiet-machine lock of the test suite (tests/quiet_machine.py): a timed section waits for
the test the other worker is running, and the other worker starts none while it runs."""

from __future__ import annotations

import threading
import time

import quiet_machine


def test_a_timed_section_waits_for_the_running_test_and_holds_back_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(quiet_machine, "_DIR", tmp_path)
    order: list[str] = []
    running, timed_waiting = threading.Event(), threading.Event()

    def other_worker_test(name: str, hold_s: float, started: threading.Event | None = None):
        with quiet_machine.shared():
            order.append(f"{name} start")
            if started:
                started.set()
            time.sleep(hold_s)
            order.append(f"{name} end")

    first = threading.Thread(target=other_worker_test, args=("test 1", 0.3, running))
    first.start()
    running.wait(5)

    def timed():
        timed_waiting.set()
        with quiet_machine.quiet_machine("a timed section"):
            order.append("timed start")
            time.sleep(0.3)
            order.append("timed end")

    section = threading.Thread(target=timed)
    section.start()
    timed_waiting.wait(5)
    time.sleep(0.1)  # the section is now waiting; a test asked for meanwhile must wait behind it
    second = threading.Thread(target=other_worker_test, args=("test 2", 0.0))
    second.start()
    for t in (first, section, second):
        t.join(10)
    assert order == ["test 1 start", "test 1 end", "timed start", "timed end", "test 2 start", "test 2 end"], order


def test_without_a_lock_directory_both_sides_are_no_ops(monkeypatch):
    """-n 0: one process, nothing beside the test."""
    monkeypatch.setattr(quiet_machine, "_DIR", None)
    with quiet_machine.shared(), quiet_machine.quiet_machine("alone"):
        pass
