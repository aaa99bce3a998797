"""Rules stay thin: every rule's `run:` block in rules/<stage>.smk is one call,
`rulelog.logged(log..., workflow_lib.<stage>.rule.run, ...)` (a second rule of a stage:
`rule.run_<rule>`), whose arguments only name what the rule declares (input, output, params,
wildcards, log) or a workflow constant (STORE, RESULTS): no computation in a rule, and every
outcome in its log (workflow_lib/core/rulelog.py)."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = sorted((ROOT / "rules").glob("*.smk"))
DECLARED = {"input", "output", "params", "wildcards", "log"}
# Stages whose entry is not yet rule.py's run (issue 37: the diagnosis engine and the capture
# split are reworked on their own branches); their entry need only be in the stage's package.
OWN_ENTRY = {"capture"}


def entry_name(stage: str, rule: str) -> str:
    """The one entry a rule calls: workflow_lib.<stage>.rule.run, or run_<rule> for a stage's second rule."""
    return f"workflow_lib.{stage}.rule." + ("run" if rule == stage else f"run_{rule}")


def rule_runs(text: str) -> dict[str, str]:
    """rule name -> the source of its `run:` block ('' when it has none)."""
    out: dict[str, str] = {}
    blocks = re.split(r"^(?:rule|checkpoint) (\w+):\n", text, flags=re.M)
    for name, body in zip(blocks[1::2], blocks[2::2]):
        lines = body.splitlines()
        run: list[str] = []
        for i, line in enumerate(lines):
            if line.rstrip() == "    run:":
                for follow in lines[i + 1:]:
                    if follow.strip() and not follow.startswith("        "):
                        break
                    run.append(follow)
                break
        out[name] = textwrap.dedent("\n".join(run)).strip()
    return out


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _is_reference(node: ast.AST) -> bool:
    """input[0], output.trace, params.design, wildcards.block, log[0], STORE: names, no computation."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
        return False
    root = _root(node)
    if not isinstance(root, ast.Name):
        return False
    if root is node:
        return root.id.isupper()  # a workflow constant from rules/common.smk
    return root.id in DECLARED and all(isinstance(n, (ast.Attribute, ast.Subscript, ast.Name, ast.Constant, ast.expr_context))
                                       for n in ast.walk(node))


def problems(stage: str, rule: str, run: str) -> list[str]:
    """Why this `run:` block is not the one shape (empty: it is)."""
    where = f"rules/{stage}.smk rule {rule}"
    if not run:
        return [f"{where}: no run: block"]
    tree = ast.parse(run)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr) or not isinstance(tree.body[0].value, ast.Call):
        return [f"{where}: the run: block is more than one call"]
    call = tree.body[0].value
    if _dotted(call.func) != "rulelog.logged":
        return [f"{where}: calls {_dotted(call.func) or ast.unparse(call.func)}, not through rulelog.logged"]
    if len(call.args) < 2:
        return [f"{where}: rulelog.logged needs the log and the stage entry"]
    out = []
    log, entry, *rest = call.args
    if not (isinstance(_root(log), ast.Name) and _root(log).id == "log" and log is not _root(log)):
        out.append(f"{where}: the first argument is {ast.unparse(log)}, not the rule's log")
    name = _dotted(entry)
    if name is None or not name.startswith(f"workflow_lib.{stage}."):
        out.append(f"{where}: the entry {ast.unparse(entry)} is not in workflow_lib.{stage}")
    elif stage not in OWN_ENTRY and name != entry_name(stage, rule):
        out.append(f"{where}: the entry {name} is not {entry_name(stage, rule)}")
    else:
        module, _, attr = name.rpartition(".")
        if not callable(getattr(importlib.import_module(module), attr, None)):
            out.append(f"{where}: {name} is not a function")
    for arg in [*rest, *(k.value for k in call.keywords)]:
        if not _is_reference(arg):
            out.append(f"{where}: computes {ast.unparse(arg)} in the rule (make it a param or do it in the stage)")
    return out


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_every_rule_calls_one_stage_entry_through_rulelog(path):
    if path.stem == "common":
        assert not rule_runs(path.read_text(encoding="utf-8")), "rules/common.smk holds helpers, no rules"
        return
    runs = rule_runs(path.read_text(encoding="utf-8"))
    assert runs, f"{path.name} defines no rule"
    found = [p for rule, run in runs.items() for p in problems(path.stem, rule, run)]
    assert not found, "\n".join(found)


def test_every_rule_file_is_read():
    # A rule written in a shape the parser missed would pass unchecked: count the rules another way.
    for path in RULE_FILES:
        text = path.read_text(encoding="utf-8")
        assert len(rule_runs(text)) == len(re.findall(r"^(?:rule|checkpoint) \w+:", text, flags=re.M)) == text.count("\n    run:\n")


@pytest.mark.parametrize("bad, why", [
    ("workflow_lib.preflight.rule.run(input[0], wildcards.block, STORE, output[0], results_dir=params.results_dir)",
     "not through rulelog.logged"),
    ("import workflow_lib.preflight.rule\n\nrulelog.logged(log[0], workflow_lib.preflight.rule.run, input[0])",
     "more than one call"),
    ("rulelog.logged(log[0], workflow_lib.plan.rule.run, input[0], STORE, output[0])",
     "is not in workflow_lib.preflight"),
    ("rulelog.logged(log[0], workflow_lib.preflight.rule.run, input[0], wildcards.block, STORE, output[0], "
     "results_dir=layout.incident_dir(RESULTS, wildcards.incident))", "computes layout.incident_dir"),
    ("rulelog.logged(log[0], workflow_lib.preflight.rule.run, os.path.dirname(input[0]))", "computes os.path.dirname"),
    ("rulelog.logged(log[0], workflow_lib.preflight.check.preflight, input[0])", "is not workflow_lib.preflight.rule.run"),
    ("rulelog.logged(output[0], workflow_lib.preflight.rule.run, input[0])", "not the rule's log"),
])
def test_one_broken_rule_fails(bad, why):
    """The preflight rule as it is, then with its run: block broken one way at a time."""
    text = (ROOT / "rules" / "preflight.smk").read_text(encoding="utf-8")
    (run,) = rule_runs(text).values()
    assert problems("preflight", "preflight", run) == []
    broken = text.replace(textwrap.indent(run, " " * 8), textwrap.indent(bad, " " * 8))
    assert broken != text
    (broken_run,) = rule_runs(broken).values()
    found = problems("preflight", "preflight", broken_run)
    assert found and why in found[0], found


def test_every_stage_but_the_reworked_two_has_rule_run():
    """A newcomer finds each stage's rule entry by one name: workflow_lib/<stage>/rule.py's run."""
    stages = sorted(p.stem for p in RULE_FILES if p.stem != "common")
    for stage in stages:
        if stage in OWN_ENTRY:
            continue
        assert callable(getattr(importlib.import_module(f"workflow_lib.{stage}.rule"), "run", None)), stage
