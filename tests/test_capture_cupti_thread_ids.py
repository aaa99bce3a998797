"""CUPTI is asked for Linux tids (SYSTEM thread ids), so runtime calls of any thread, C++ ones
included, match the spans, steps and scheduler samples; without that call the recorder
falls back to mapping the Python threads it can, and the manifest says which applied."""

import enum

from workflow_lib.capture.sources import cupti as cupti_mod
from workflow_lib.capture.sources.cupti import CuptiSource

from test_capture_cupti import FakeCupti


class ThreadIdType(enum.IntEnum):
    DEFAULT = 0
    SYSTEM = 1


class FakeCuptiWithTid(FakeCupti):
    ActivityThreadIdType = ThreadIdType

    def __init__(self):
        super().__init__()
        self.tid_type = None

    def set_thread_id_type(self, t):
        self.tid_type = t


def test_system_thread_ids_requested(monkeypatch):
    fake = FakeCuptiWithTid()
    monkeypatch.setattr(cupti_mod, "cupti", fake)
    src = CuptiSource(1024, 1024, 1024)
    src.start()
    assert fake.tid_type == int(ThreadIdType.SYSTEM) and src.thread_ids.startswith("system")
    assert src.manifest_entry(src.copies())["detail"]["thread_id_type"].startswith("system")


def test_without_the_call_pthread_ids_are_said(monkeypatch):
    monkeypatch.setattr(cupti_mod, "cupti", FakeCupti())
    src = CuptiSource(1024, 1024, 1024)
    src.start()
    assert src.thread_ids.startswith("pthread ids")
