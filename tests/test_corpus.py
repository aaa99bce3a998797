"""The bad-input corpus (tests/corpus/, see generate.py) through the real CLI, in subprocesses.

Every entry must end in: exit status != 0, stderr exactly one line `error: ...` naming
the file (or flag) and containing the expected problem, no traceback, no file written
to any output directory, the input unchanged, and no PWNED file (pickles that try to
run code). Entries whose consumer is not on this branch yet (an importer another helper
is writing) are reported as not consumable and counted separately; the test fails if
fewer than 200 entries were checked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.cas import hash_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())["entries"]
WORKERS = 2  # the machine is shared: two subprocesses at a time

CONSUMER_MODULE = {
    "import_kineto": "workflow_lib.importers.kineto",
    "import_torch_fr": "workflow_lib.importers.torch_fr",
    "diagnose": "workflow_lib.commands.diagnose",
}


def available(consumer: str) -> bool:
    mod = CONSUMER_MODULE.get(consumer)
    return mod is None or importlib.util.find_spec(mod) is not None


def argv_for(entry: dict, inp: Path, out: Path) -> list[str]:
    c = entry["consumer"]
    extra = entry.get("args", [])
    if c == "ingest":
        return ["ingest", str(inp), "--results-dir", str(out / "results")]
    if c == "diagnose":
        return ["diagnose", str(inp), "-o", str(out / "diagnosis.json")]
    if c == "verify":
        return ["verify", str(inp)]
    if c == "verify_incidents":
        return ["verify", str(inp.parent / "results"), "--incidents-dir", str(inp)]
    fmt = {"import_kineto": "kineto", "import_torch_fr": "torch-fr"}[c]
    incident = [] if any(a.startswith("--incident") and not a.startswith("--incidents-dir") for a in extra) else ["--incident", "corpus"]
    return ["import", fmt, str(inp), *incident, *extra, "--incidents-dir", str(out / "incidents")]


def tree_state(top: Path) -> dict[str, str]:
    """Every file (and symlink) under top with its content digest (links by target)."""
    state = {}
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            p = Path(dirpath) / name
            state[os.fsencode(p).hex()] = ("link:" + os.readlink(p)) if p.is_symlink() else hash_file(p)
    return state


def expected_name(entry: dict, work: Path) -> str:
    """The text the error line must contain to name the file or flag."""
    names = entry["names"]
    if names.startswith("/") or "/" not in names:  # an absolute path or a flag, as given
        return names
    p = work / names
    # stderr prints non-UTF-8 names with backslash escapes (Python's stderr error handler).
    return str(p).encode("utf-8", "backslashreplace").decode("utf-8")


class ForkServer:
    """tests/cli_forkserver.py: the CLI's main() per entry in a forked child (imports paid once)."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "cli_forkserver.py")], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})

    def run(self, argv: list[str], cwd: Path) -> tuple[int, bytes]:
        err = cwd / "_stderr"
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "stdout": str(cwd / "_stdout"), "stderr": str(err)}) + "\n")
        self.proc.stdin.flush()
        rc = json.loads(self.proc.stdout.readline())["rc"]
        data = err.read_bytes()
        (cwd / "_stdout").unlink()
        err.unlink()
        return rc, data

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def real_cli(argv: list[str], cwd: Path) -> tuple[int, bytes]:
    proc = subprocess.run([sys.executable, "-m", "workflow_lib.cli", *argv], cwd=cwd, capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.returncode, proc.stderr


def run_entry(entry: dict, tmp: Path, runner=real_cli) -> str | None:
    """Run one entry; returns None when rejected cleanly, else why not."""
    work = tmp / entry["id"].replace("/", "__")
    # Copy the entry's whole directory (symlink targets beside the incident come along);
    # single-file entries (traces, pickles) bring their category directory.
    parts = entry["input"].split("/")
    src_dir = CORPUS / parts[0] / parts[1]
    if not src_dir.is_dir() or src_dir.is_symlink() or len(parts) == 2:
        src_dir = CORPUS / parts[0]
    dst_dir = work / os.path.relpath(src_dir, CORPUS)
    shutil.copytree(src_dir, dst_dir, symlinks=True)
    inp = work / entry["input"]
    out = work / "_out"
    before = tree_state(work)
    returncode, stderr = runner(argv_for(entry, inp, out), work)
    err = stderr.decode("utf-8", "backslashreplace")
    lines = err.splitlines()
    problems = []
    if returncode == 0:
        problems.append("exit status 0")
    if "Traceback" in err:
        problems.append("traceback: " + lines[-1] if lines else "traceback")
    if len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append(f"stderr is not one error line: {err[-300:]!r}")
    else:
        if entry["fragment"] and entry["fragment"] not in lines[0]:
            problems.append(f"missing {entry['fragment']!r} in {lines[0]!r}")
        name = expected_name(entry, work)
        if name not in lines[0]:
            problems.append(f"does not name {name!r}: {lines[0]!r}")
    after = tree_state(work)
    if after != before:
        new = sorted(os.fsdecode(bytes.fromhex(k)) for k in set(after) - set(before))
        changed = sorted(os.fsdecode(bytes.fromhex(k)) for k in set(before) & set(after) if before[k] != after[k])
        problems.append(f"files written or changed: {(new + changed)[:3]}")
    if any(p.name == "PWNED" for p in work.rglob("PWNED")):
        problems.append("pickle payload ran")
    return "; ".join(problems) or None


def test_corpus_rejects_every_entry_cleanly(tmp_path):
    """Every entry through the CLI's main() in a fresh forked process per entry."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    runnable = [e for e in EXPECTED if available(e["consumer"])]
    skipped = sorted({e["consumer"] for e in EXPECTED} - {e["consumer"] for e in runnable})
    servers: queue.Queue = queue.Queue()
    for _ in range(WORKERS):
        servers.put(ForkServer())

    def one(e):
        srv = servers.get()
        try:
            return e, run_entry(e, tmp_path, srv.run)
        finally:
            servers.put(srv)

    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(one, runnable))
    finally:
        while not servers.empty():
            servers.get().close()
    failures = [f"{e['id']} ({e['consumer']}): {why}" for e, why in results if why]
    n = len(runnable)
    print(f"\n{n - len(failures)} rejected cleanly of {n}"
          + (f" ({len(EXPECTED) - n} entries not consumable here: no {', '.join(skipped)})" if skipped else ""))
    assert not failures, f"{len(failures)} of {n} entries not rejected cleanly:\n" + "\n".join(failures)
    assert n >= 200


def test_one_entry_per_category_through_python_m(tmp_path):
    """The fork server is a shortcut; `python -m workflow_lib.cli` itself must agree."""
    firsts: dict[str, dict] = {}
    for e in EXPECTED:
        if available(e["consumer"]):
            firsts.setdefault(e["id"].split("/")[0] + e["consumer"], e)
    failures = [f"{e['id']}: {why}" for e in firsts.values() if (why := run_entry(e, tmp_path))]
    assert not failures, "\n".join(failures)


def test_corpus_covers_every_category():
    cats = {e["id"].split("/")[0] for e in EXPECTED}
    assert cats >= {"parquet_truncated", "parquet_corrupted", "manifest_schema", "wrong_digest", "path_escape",
                    "kineto_hostile", "nonutf8_names", "pickle_hostile", "duplicate_steps", "timestamps", "clock_backwards"}
    assert len(EXPECTED) >= 200


def test_corpus_is_small_and_generated_deterministically(tmp_path):
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file() and not p.is_symlink())
    assert size < 2 << 20
    proc = subprocess.run([sys.executable, str(CORPUS / "generate.py"), str(tmp_path / "c")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "c" / "expected.json").read_text())["entries"]
    assert again == EXPECTED
    for e in EXPECTED:  # every input named by an expectation was committed
        assert os.path.lexists(CORPUS / e["input"]), e["id"]
