"""Run `stallcase` commands fast: import once, fork per command (tests/test_corpus.py).

Reads one JSON object per line on stdin: {"argv": [...], "cwd": DIR, "stdout": FILE,
"stderr": FILE}; forks; the child chdirs, points fds 1 and 2 at the files and does what
`python -m workflow_lib.cli ARGV` does (sys.exit(main(argv)); an uncaught exception
prints its traceback and exits 1, as the interpreter would). The parent answers
{"rc": N, "maxrss_kib": peak RSS} per line; a command still running after
"timeout_s" (default 120) is ended by SIGALRM. Saves ~0.5 s of imports per command on a shared 2-core machine.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback


def _child(job: dict) -> None:
    # A hang is a failure, not a stuck suite: SIGALRM ends the command (rc -14).
    signal.alarm(int(job.get("timeout_s", 120)))
    os.chdir(job["cwd"])
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    code = 1
    try:
        from workflow_lib.cli import main

        code = main(job["argv"])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - report exactly as an uncaught exception would
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    import importlib

    for mod in ("workflow_lib.cli", "workflow_lib.snapshot.build", "workflow_lib.snapshot.verify", "pyarrow.parquet", "numpy",
                "workflow_lib.importers.kineto", "workflow_lib.importers.torch_fr", "workflow_lib.diagnose"):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass  # not on this branch: the child imports (and fails) like a real run would
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(job)
        _, status, usage = os.wait4(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        # Peak resident memory of the command (Linux: KiB), imports included.
        sys.stdout.write(json.dumps({"rc": rc, "maxrss_kib": usage.ru_maxrss}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
