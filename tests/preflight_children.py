"""Child process for the concurrent-preflight test: wait for the start file, run one
preflight on a fake GPU (driver, UUID), print its status."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workflow_lib.preflight import check as PF  # noqa: E402
from workflow_lib.core import records, typed  # noqa: E402
from workflow_lib.plan.types import Plan  # noqa: E402

from test_preflight import gpu_env  # noqa: E402

plan_path, results, driver, uuid, go = sys.argv[1:6]

# A slow shared file system: the registry write takes 0.5 s, so without the lock every
# racing block reads the registry before any has written it (the test's mutant check).
_write_text = PF.atomic.write_text


def _slow_write_text(*a, **kw):
    time.sleep(0.5)
    return _write_text(*a, **kw)


PF.atomic.write_text = _slow_write_text
plan = typed.read(plan_path, Plan)
env = gpu_env(driver=driver, uuid=uuid)
deadline = time.monotonic() + 60
while not Path(go).exists() and time.monotonic() < deadline:
    time.sleep(0.0005)
rec = PF.preflight(plan, records.digest_of(plan), "b000", results, results_dir=results, observed_env=env)
print(rec["status"])
