"""Commands stay thin: what a command in workflow_lib/commands/ prints is rendered by
workflow_lib/report/text.py, never built in the command (tests/test_import_graph.py checks
that no command imports another)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = sorted(p for p in (ROOT / "workflow_lib" / "commands").glob("*.py") if p.name != "__init__.py")


def _text_names(tree: ast.AST) -> set[str]:
    """Names a command imported from report/text.py."""
    return {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").endswith("report.text")
            for a in n.names}


def _is_render(node: ast.AST, renderers: set[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in renderers


def unrendered_prints(source: str) -> list[str]:
    """Each print whose argument is not a line report/text.py rendered (a call to one of its
    functions, or a name bound to one: `for line in diagnosis_lines(...)`)."""
    tree = ast.parse(source)
    renderers = _text_names(tree)
    rendered: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and _is_render(n.iter, renderers):
            rendered.add(n.target.id)
        elif isinstance(n, ast.Assign) and _is_render(n.value, renderers):
            rendered.update(t.id for t in n.targets if isinstance(t, ast.Name))
    bad = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print":
            for arg in n.args:
                if not (_is_render(arg, renderers) or (isinstance(arg, ast.Name) and arg.id in rendered)):
                    bad.append(f"line {n.lineno}: print({ast.unparse(arg)})")
    return bad


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.stem)
def test_a_command_prints_only_what_report_text_renders(path):
    assert unrendered_prints(path.read_text(encoding="utf-8")) == [], path.name


@pytest.mark.parametrize("body", [
    'def run(args):\n    print(f"wrote {args.output}")\n',
    'def run(args):\n    line = "wrote " + args.output\n    print(line)\n',
    'def run(args):\n    from ..report.text import wrote_line\n    for line in ["a"]:\n        print(line)\n',
    'def run(args):\n    from ..report import text\n    print(text.wrote_line(args.output).upper())\n',
])
def test_a_line_built_in_a_command_fails(body):
    assert unrendered_prints(body)


def test_the_lines_are_those_the_command_printed_before(capsys, tmp_path):
    """The diagnose command's lines moved to report/text.py unchanged: a dump-only record and a
    record with steps, rendered as the command printed them."""
    from workflow_lib.report.text import diagnosis_lines

    steps = {"summary": {"steps": 3, "explained_ns": 1_500_000, "wall_ns": 3_000_000, "unexplained_ns": 1_500_000,
                         "by_check": {}, "windows": [], "slow_steps": [],
                         "warm_up": {"wall_ns": 2_000_000_000, "steps": 1, "step_ids": [0], "over_typical_ns": 1_000_000_000,
                                     "once_per_process": True}},
             "next_experiments": [{"rank": 1, "check": "host_submission", "recoverable_upper_bound_ns": 1_000_000, "steps": 3,
                                   "risk": "low", "risk_note": "", "candidate_change": "overlap the host work"}]}
    assert diagnosis_lines(steps, "d.json") == [
        "wrote d.json: 3 steps, 1.500 of 3.000 ms explained",
        "slow steps: none at >= 1.5x the typical step",
        "  1. host_submission: up to 1.000 ms (low risk) - overlap the host work",
        "warm-up: 2.000 s, once per process (1 cold first step(s); not ranked)"]
    dump_only = {"summary": {}, "collectives": {"hung_on": None}}
    assert diagnosis_lines(dump_only, "d.json") == [
        "wrote d.json: no steps; collectives only",
        "hung on: nothing (every op some member recorded was completed by its members)"]
