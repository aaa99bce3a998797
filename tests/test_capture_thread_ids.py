import threading

import pyarrow as pa

from workflow_lib.capture.snapshot import native_thread_ids as _native_thread_ids


def test_cupti_pthread_ids_become_linux_tids_for_live_threads():
    seen = {}
    ready, done = threading.Event(), threading.Event()

    def worker():
        seen["ident"], seen["tid"] = threading.get_ident(), threading.get_native_id()
        ready.set()
        done.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(5)
    try:
        # CUPTI reports the low 32 bits of pthread_t (CUpti_ActivityAPI.threadId is uint32).
        table = pa.table({"thread_id": pa.array([threading.get_ident(), seen["ident"] & 0xFFFFFFFF, 123456789], pa.int64())})
        out, detail = _native_thread_ids(table)
    finally:
        done.set()
        t.join()
    assert out["thread_id"].to_pylist() == [threading.get_native_id(), seen["tid"], 123456789]
    assert detail["cupti_thread_ids"] == 3 and detail["mapped_to_linux_tid"] == 2
