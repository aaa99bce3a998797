"""A small mutation pass: do the tests of the checks, statistics and the trial runner's
block status fail when the code they test is wrong?

    python tests/tools/mutate.py [--list] [--only SUBSTR] [--out FILE]

Each mutant changes one token in a copy of the repository (never this checkout): a
comparison flipped at its boundary (< <-> <=, > <-> >=, == <-> !=), `and` <-> `or`, a
`min`/`max` swapped, or a numeric threshold nudged. The target's own tests run against the
copy; a mutant is *killed* when they fail (or run past the timeout), *survived* when they
pass. Targets and their tests are listed in TARGETS; every survivor needs a test that kills
it or a note in docs/security.md saying why it is equivalent.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# file -> (tests that cover it, line range to mutate (None: whole file), at most N mutants)
TARGETS = {
    "workflow_lib/diagnose/checks/input_starvation.py": (["tests/test_diagnose_checks.py"], None, 3),
    "workflow_lib/diagnose/checks/sync_stall.py": (["tests/test_diagnose_checks.py"], None, 3),
    "workflow_lib/diagnose/checks/clock_throttle.py": (["tests/test_diagnose_checks.py"], None, 3),
    "workflow_lib/diagnose/checks/host_submission.py": (["tests/test_diagnose_checks.py"], None, 3),
    "workflow_lib/diagnose/checks/launch_bound.py": (["tests/test_diagnose_checks.py"], None, 2),
    "workflow_lib/diagnose/checks/gpu_bound.py": (["tests/test_diagnose_checks.py"], None, 2),
    "workflow_lib/compare/stats.py": (["tests/test_stats.py", "tests/test_compare_stats.py"], None, 3),
    "workflow_lib/compare/verdict.py": (["tests/test_stats.py", "tests/test_compare_stats.py"], None, 3),
    # run_block's status: which attempt decides a run, and the failed-fraction limit.
    "workflow_lib/trials/block.py": (["tests/test_trials_runner.py", "tests/test_mutation_kills.py"], ("status = \"complete\"", "return {\"schema_version\": 1, \"kind\": \"execution\""), 8),
}
# Mutations a token swap cannot express: (file, exact text, replacement, what it breaks).
CUSTOM = [
    ("workflow_lib/trials/block.py", "    for r in runs:  # last attempt of each scheduled run decides",
     "    for r in reversed(runs):  # last attempt of each scheduled run decides", "the first attempt decides a run"),
]
SWAP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "and": "or", "or": "and",
        "min": "max", "max": "min"}


def _line_range(text: str, span) -> tuple[int, int]:
    if span is None:
        return 1, text.count("\n") + 1
    lines = text.splitlines()
    lo = next(i for i, line in enumerate(lines, 1) if span[0] in line)
    hi = next(i for i, line in enumerate(lines, 1) if i > lo and span[1] in line)
    return lo, hi


def mutants(rel: str, span, limit: int) -> list[dict]:
    """Candidate single-token mutations, spread evenly over the file (deterministic)."""
    text = (ROOT / rel).read_text()
    lo, hi = _line_range(text, span)
    found = []
    lines = text.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        (row, col), (_, ecol) = tok.start, tok.end
        if not lo <= row <= min(hi, len(lines)) or tok.type not in (tokenize.OP, tokenize.NAME, tokenize.NUMBER):
            continue
        line = lines[row - 1]
        if line.lstrip().startswith(("#", '"""')) or '"""' in line:
            continue
        new = None
        if tok.type == tokenize.OP and tok.string in SWAP:
            new = SWAP[tok.string]
        elif tok.type == tokenize.NAME and tok.string in SWAP:
            new = SWAP[tok.string]
        elif (tok.type == tokenize.NUMBER and tok.string not in ("0", "1", "2") and "e" not in tok.string.lower()
              and not any(k in line for k in ("round(", "range(", "_MAX_ITER", "_EXAMPLES"))):  # precision, enums: not logic
            try:
                v = float(tok.string)
            except ValueError:
                continue
            if v == 0:
                continue
            new = repr(round(v * 1.5, 6)) if v < 1 else str(int(v * 2) if float(v).is_integer() else v * 2)
        if new is not None:
            found.append({"file": rel, "line": row, "col": col, "end": ecol, "old": tok.string, "new": new,
                          "source": line.strip()})
    if len(found) > limit:
        step = len(found) / limit
        found = [found[int(i * step)] for i in range(limit)]
    return found


def apply(copy: Path, m: dict) -> None:
    p = copy / m["file"]
    lines = p.read_text().splitlines(keepends=True)
    line = lines[m["line"] - 1]
    assert line[m["col"]:m["end"]] == m["old"], (m, line)
    lines[m["line"] - 1] = line[:m["col"]] + m["new"] + line[m["end"]:]
    p.write_text("".join(lines))


def run_tests(copy: Path, tests: list[str], timeout: int) -> str:
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests], cwd=copy,
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "killed (timeout)"
    return "survived" if proc.returncode == 0 else "killed"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    todo = [m for rel, (tests, span, n) in TARGETS.items() for m in mutants(rel, span, n)
            if not args.only or args.only in rel]
    for rel, old, new, why in CUSTOM:
        text = (ROOT / rel).read_text()
        row = text[:text.index(old)].count("\n") + 1
        if not args.only or args.only in rel:
            todo.append({"file": rel, "line": row, "col": 0, "end": len(old), "old": old, "new": new, "source": why})
    if args.list:
        for m in todo:
            print(f"{m['file']}:{m['line']}: {m['old']} -> {m['new']}   {m['source']}")
        return 0
    import queue
    from concurrent.futures import ThreadPoolExecutor

    tmp = Path(tempfile.mkdtemp(prefix="stallcase-mutants-"))
    copies: queue.Queue = queue.Queue()
    for i in range(args.workers):  # one copy per worker: mutants never share a tree
        c = tmp / f"repo{i}"
        shutil.copytree(ROOT, c, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "corpus", "*.pyc"))
        copies.put(c)
    results = []

    def one(m):
        copy = copies.get()
        original = (copy / m["file"]).read_text()
        try:
            apply(copy, m)
            outcome = run_tests(copy, TARGETS[m["file"]][0], args.timeout)
        finally:
            (copy / m["file"]).write_text(original)
            copies.put(copy)
        print(f"{outcome:17} {m['file']}:{m['line']}: {m['old']} -> {m['new']}   {m['source'][:90]}", flush=True)
        return dict(m, outcome=outcome)

    try:
        first = copies.get()
        sets = {tuple(t) for rel, (t, _s, _n) in TARGETS.items() if not args.only or args.only in rel}
        baseline = {s: run_tests(first, list(s), args.timeout) for s in sets}  # each test set once, unmutated
        copies.put(first)
        assert all(v == "survived" for v in baseline.values()), f"tests fail without any mutant: {baseline}"
        with ThreadPoolExecutor(args.workers) as pool:
            results = list(pool.map(one, todo))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    killed = sum(r["outcome"].startswith("killed") for r in results)
    print(f"{len(results)} mutants, {killed} killed, {len(results) - killed} survived")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
