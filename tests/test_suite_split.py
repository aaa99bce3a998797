"""The suite's split over two xdist workers (tests/conftest.py): every end-to-end module shares
one serial scope, whole, and the small tests are scopes of their own."""

from __future__ import annotations

from pathlib import Path

from conftest import SERIAL_SCOPE, scope_of, serial_modules


def test_end_to_end_modules_share_the_serial_scope_and_small_ones_do_not():
    serial = serial_modules()
    for name in ("test_torchrun_e2e.py", "test_own_workload_e2e.py", "test_multiprocess_e2e.py", "test_slurm.py",
                 "test_report_browser.py", "test_pipeline_e2e.py", "test_typed_records.py"):
        assert name in serial, name
    for name in ("test_stats.py", "test_walsh_select.py", "test_diagnose_job.py", "test_suite_split.py"):
        assert name not in serial, name
    assert scope_of("tests/test_torchrun_e2e.py::test_x", serial) == SERIAL_SCOPE
    assert scope_of("tests/test_stats.py::test_y[3]", serial) == "tests/test_stats.py::test_y[3]"


def test_a_module_with_one_end_to_end_test_goes_whole(tmp_path):
    fixture = "demo_" + "pipeline"  # spelled apart: this module's own text must not match
    (tmp_path / "test_mixed.py").write_text(f"def test_small():\n    pass\n\n\ndef test_big({fixture}):\n    pass\n")
    (tmp_path / "test_small.py").write_text("def test_small():\n    pass\n")
    assert serial_modules(tmp_path) == {"test_mixed.py"}


def test_untimed_end_to_end_modules_are_units_of_their_own_and_share_no_demo_run():
    from conftest import UNTIMED_END_TO_END

    serial = serial_modules()
    tests_dir = Path(__file__).resolve().parent
    for name in UNTIMED_END_TO_END:
        assert name in serial, name  # still an end-to-end module (slow, or a real run)
        assert scope_of(f"tests/{name}::test_a", serial) == scope_of(f"tests/{name}::test_b", serial) == name
        # a module using the session's demo run on the other worker would make that run twice
        assert "demo_" + "pipeline" not in (tests_dir / name).read_text(encoding="utf-8"), name
