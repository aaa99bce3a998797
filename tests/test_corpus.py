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
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_lib.core.cas import hash_file

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())["entries"]
# Two subprocesses at a time on its own; one under pytest-xdist, whose other worker runs the
# end-to-end tests beside it (tests/conftest.py) on a 2-core machine.
WORKERS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2
ENTRY_TIMEOUT_S = 60  # a hang fails its entry instead of the suite
MAX_RSS_BYTES = 2 << 30  # docs/security.md: peak RSS <= 2 GiB whatever the input

CONSUMER_MODULE = {
    "import_kineto": "workflow_lib.importers.kineto",
    "import_nsys": "workflow_lib.importers.nsys",
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
    if c == "check_config":
        return ["check-config", str(inp)]
    if c == "argv":  # the command as the entry spells it, {w} = the entry's work directory
        work = out.parent
        return [a.replace("{w}", str(work)) for a in entry["argv"]]
    fmt = {"import_kineto": "kineto", "import_nsys": "nsys", "import_torch_fr": "torch-fr"}[c]
    incident = [] if any(a.startswith("--incident") and not a.startswith("--incidents-dir") for a in extra) else ["--incident", "corpus"]
    return ["import", fmt, str(inp), *incident, *extra, "--incidents-dir", str(out / "incidents")]


def tree_state(top: Path) -> dict[str, str]:
    """Every file (and symlink, FIFO, ...) under top with its content digest (links by target;
    special files by kind; files over 64 MiB, the sparse ones, by size and mtime: never read)."""
    state = {}
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                v = "link:" + os.readlink(p)
            elif not stat.S_ISREG(st.st_mode):
                v = f"special:{stat.S_IFMT(st.st_mode)}"
            elif st.st_size > 64 << 20:
                v = f"big:{st.st_size}:{st.st_mtime_ns}"
            else:
                v = hash_file(p)
            state[os.fsencode(p).hex()] = v
    return state


def make_special(work: Path, spec: dict) -> None:
    """Files git cannot hold, made in the copied entry: FIFOs, sparse giants, links to devices."""
    p = work / spec["path"]
    p.parent.mkdir(parents=True, exist_ok=True)
    if spec["kind"] == "fifo":
        os.mkfifo(p)
    elif spec["kind"] == "sparse":
        with open(p, "wb") as fh:
            fh.write(bytes.fromhex(spec.get("prefix_hex", "")))
            fh.truncate(spec["size"])
    elif spec["kind"] == "symlink":
        if os.path.lexists(p):
            p.unlink()
        p.symlink_to(spec["target"])
    elif spec["kind"] == "socket":
        import socket

        s = socket.socket(socket.AF_UNIX)
        here = os.getcwd()
        os.chdir(p.parent)  # a relative bind: socket paths are limited to 108 bytes
        try:
            s.bind(p.name)
        finally:
            os.chdir(here)
            s.close()
    else:
        raise AssertionError(f"unknown special kind {spec['kind']}")


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
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=cli_env())

    def run(self, argv: list[str], cwd: Path) -> tuple[int, bytes, int | None]:
        err = cwd / "_stderr"
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "stdout": str(cwd / "_stdout"), "stderr": str(err),
                                          "timeout_s": ENTRY_TIMEOUT_S}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        data = err.read_bytes()
        (cwd / "_stdout").unlink()
        err.unlink()
        return answer["rc"], data, answer["maxrss_kib"] * 1024

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def cli_env() -> dict[str, str]:
    """The CLI's environment: no roots declared beyond the working directory."""
    env = {k: v for k, v in os.environ.items() if k != "STALLCASE_ALLOW_ROOTS"}
    return {**env, "PYTHONPATH": str(ROOT)}


def real_cli(argv: list[str], cwd: Path) -> tuple[int, bytes, int | None]:
    proc = subprocess.run([sys.executable, "-m", "workflow_lib.cli", *argv], cwd=cwd, capture_output=True, timeout=300,
                          env=cli_env())
    return proc.returncode, proc.stderr, None


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
    for spec in entry.get("special", []):
        make_special(work, spec)
    for rel in entry.get("fill_w", []):  # absolute paths into this copy, written at run time
        f = work / rel
        f.write_bytes(f.read_bytes().replace(b"{w}", str(work).encode()))
    inp = work / entry["input"]
    out = work / "_out"
    # An empty working directory: it is a declared root (docs/security.md), so an entry's
    # files beside the incident are outside every root the run may read from.
    cwd = work / "_cwd"
    cwd.mkdir()
    before = tree_state(work)
    returncode, stderr, peak = runner(argv_for(entry, inp, out), cwd)
    err = stderr.decode("utf-8", "backslashreplace")
    lines = err.splitlines()
    problems = []
    if returncode == -14:
        problems.append(f"hang: still running after {ENTRY_TIMEOUT_S} s")
    elif returncode == 0:
        problems.append("exit status 0")
    if peak is not None and peak > MAX_RSS_BYTES:
        problems.append(f"peak RSS {peak >> 20} MiB over {MAX_RSS_BYTES >> 20} MiB")
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

    peaks: dict[str, int | None] = {}  # entry id -> the child's peak RSS (wait4), measured per entry

    def one(e):
        srv = servers.get()

        def measured(argv, cwd):
            rc, err, peak = srv.run(argv, cwd)
            peaks[e["id"]] = peak
            return rc, err, peak

        try:
            return e, run_entry(e, tmp_path, measured)
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
    top = sorted(((p, i) for i, p in peaks.items() if p is not None), reverse=True)[:3]
    print("highest peak RSS: " + ", ".join(f"{i} {p >> 20} MiB" for p, i in top) + f" (cap {MAX_RSS_BYTES >> 20} MiB)")
    assert not failures, f"{len(failures)} of {n} entries not rejected cleanly:\n" + "\n".join(failures)
    assert n >= 200
    assert sorted(i for i, p in peaks.items() if p is not None) == sorted(e["id"] for e in runnable)  # every entry measured


@pytest.mark.parametrize("family", ["kineto-step-", "collectives-", "artifact-"])
def test_each_held_out_family_of_issue_38_is_rejected_cleanly(tmp_path, family):
    """The three families an independent corpus still broke (docs/security.md, tests/corpus/round4.py):
    a non-ASCII digit captured by a Kineto step pattern, broken JSON in a collectives table's text
    columns, an artifact present with another size or digest. Each entry: one line, non-zero, nothing written."""
    entries = [e for e in EXPECTED if e["id"].startswith(f"r4_heldout/{family}")]
    assert len(entries) >= 4 and all(available(e["consumer"]) for e in entries)
    failures = [f"{e['id']}: {why}" for e in entries if (why := run_entry(e, tmp_path))]
    assert not failures, "\n".join(failures)


def test_one_entry_per_command_through_python_m(tmp_path):
    """The fork server is a shortcut; `python -m workflow_lib.cli` itself must agree. What the
    server changes is the process' start (its modules imported before the command), which is
    the same for every entry of one command: the first entry of each consumer and command (and
    import format) runs in a fresh interpreter, ~1 s each, where one per category and consumer was 65."""
    firsts: dict[tuple[str, ...], dict] = {}
    for e in EXPECTED:
        if available(e["consumer"]):
            argv = argv_for(e, Path("in"), Path("out"))
            firsts.setdefault((e["consumer"], *(argv[:2] if argv[0] == "import" else argv[:1])), e)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(WORKERS) as pool:  # each entry is its own process: two at a time
        results = list(pool.map(lambda e: (e, run_entry(e, tmp_path)), firsts.values()))
    failures = [f"{e['id']}: {why}" for e, why in results if why]
    assert not failures, "\n".join(failures)
    assert len(results) >= 10


def test_corpus_covers_every_category():
    cats = {e["id"].split("/")[0] for e in EXPECTED}
    assert cats >= {"parquet_truncated", "parquet_corrupted", "manifest_schema", "wrong_digest", "path_escape",
                    "kineto_hostile", "nonutf8_names", "pickle_hostile", "duplicate_steps", "timestamps", "clock_backwards"}
    assert len(EXPECTED) >= 200


def test_corpus_is_small_and_generated_deterministically(tmp_path):
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file() and not p.is_symlink())
    assert size < 3 << 20  # ~700 entries; git stores them compressed to well under 1 MB
    proc = subprocess.run([sys.executable, str(CORPUS / "generate.py"), str(tmp_path / "c")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "c" / "expected.json").read_text())["entries"]
    assert again == EXPECTED
    for e in EXPECTED:  # every input named by an expectation was committed (or is made at run time)
        made = {spec["path"] for spec in e.get("special", [])}
        assert e["input"] in made or os.path.lexists(CORPUS / e["input"]), e["id"]
