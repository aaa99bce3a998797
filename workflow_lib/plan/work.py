"""Work per step: how many items or tokens one step does, known for every run or refused.

A metric per item or token divides each step's time by the work that step did. The work
comes from one of three places, checked when the plan is made so that a value labelled
"ns per token" is never a time per step:

- the recorder's declared work (`rec.step(i, tokens=n)`), read from each run's steps-out;
- a named group of the step pattern (`(?P<tokens>\\d+)` or `(?P<items>...)`), read from the
  same output line as the step's duration;
- the config's declaration, `trials.metric.tokens_per_step` (or `items_per_step`): an
  arithmetic expression over flags of the arm's own argv and numbers, e.g.
  `"--batch_size * --bptt"`, evaluated for each arm from its own argv when the plan is made
  (parsed into an AST and walked over a whitelist of nodes: numbers, flags, + - * / and
  parentheses; never `eval`).

`WORK_FLAG` names the flags that change the work per step (a batch size, a sequence length,
a micro-batch count): when the arms differ in one, a per-step comparison says so.
"""

from __future__ import annotations

import ast
import re

from ..core.errors import RecordError

WORK_GROUPS = ("items", "tokens")
# Flag names that set how much work a step does (segments of the flag, case-insensitive).
WORK_FLAG = re.compile(r"(batch|bptt|seq(uence)?_?len|context|ctx|block_size|micro|accum|tokens|max_len|num_samples)",
                       re.IGNORECASE)
_FLAG = re.compile(r"--?[A-Za-z][A-Za-z0-9_.-]*")
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b}
MAX_EXPRESSION = 200


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in argv (`--k v` or `--k=v`, the last one wins); None when absent."""
    found = None
    for k, tok in enumerate(argv):
        if tok == flag and k + 1 < len(argv):
            found = argv[k + 1]
        elif tok.startswith(flag + "="):
            found = tok[len(flag) + 1:]
    return found


def evaluate(expression: str, argv: list[str], where: str) -> float:
    """The expression's value with each flag read from `argv`; RecordError naming what is wrong."""
    if not isinstance(expression, str) or not expression.strip() or len(expression) > MAX_EXPRESSION:
        raise RecordError(where, f"{expression!r}: write an arithmetic expression over flags and numbers, "
                                 "e.g. \"--batch_size * --bptt\"")
    flags: dict[str, str] = {}

    def name_of(m: re.Match) -> str:
        flags.setdefault(m.group(0), f"_f{len(flags)}")
        return flags[m.group(0)]

    src = _FLAG.sub(name_of, expression)
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError:
        raise RecordError(where, f"{expression!r} is not an arithmetic expression over flags and numbers") from None
    values: dict[str, float] = {}
    for flag, name in flags.items():
        raw = flag_value(argv, flag)
        if raw is None:
            raise RecordError(where, f"{flag} is not in the argv {' '.join(argv)[:200]!r}: write its value into the "
                                     "expression, or pass the flag in the workload")
        try:
            values[name] = float(raw)
        except ValueError:
            raise RecordError(where, f"{flag} is {raw!r} in the argv, not a number") from None

    def walk(node) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in values:
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise RecordError(where, f"{expression!r}: only numbers, flags, + - * / and parentheses are allowed")

    try:
        out = walk(tree)
    except ZeroDivisionError:
        raise RecordError(where, f"{expression!r} divides by zero for argv {' '.join(argv)[:200]!r}") from None
    if not out > 0:
        raise RecordError(where, f"{expression!r} is {out:g} for argv {' '.join(argv)[:200]!r}: work per step must be > 0")
    return out


def check_expression(expression, where: str) -> None:
    """The expression's form alone (config check): every flag given the value 1."""
    flags = _FLAG.findall(expression) if isinstance(expression, str) else []
    argv = [t for f in flags for t in (f, "1")]
    try:
        evaluate(expression, argv, where)
    except RecordError as exc:
        if "divides by zero" not in exc.problem and "must be > 0" not in exc.problem:
            raise


def declared(metric: dict, arms: dict) -> dict | None:
    """{"unit", "expression", "A", "B"}: the config's work per step for each arm, or None."""
    keys = [k for k in ("items_per_step", "tokens_per_step") if metric.get(k) is not None]
    if not keys:
        return None
    if len(keys) > 1:
        raise RecordError("trials.metric", "give items_per_step or tokens_per_step, not both")
    key = keys[0]
    unit = key.removesuffix("s_per_step")
    if metric.get("per", "step") not in ("step", unit):
        raise RecordError(f"trials.metric.{key}", f"declares {unit}s but the metric is per {metric['per']}")
    out = {"unit": unit, "expression": metric[key]}
    for arm, name in (("A", "baseline"), ("B", "candidate")):
        out[arm] = evaluate(metric[key], list(arms[name]["argv"]), f"trials.metric.{key} ({name})")
    return out


def pattern_groups(pattern: str | None) -> list[str]:
    """The work groups a step pattern names (`(?P<tokens>...)`)."""
    if not pattern:
        return []
    return [g for g in WORK_GROUPS if re.search(rf"\(\?P<{g}>", pattern)]


def changed_flags(base_argv: list[str], cand_argv: list[str]) -> list[str]:
    """Flags that set the work per step and differ between the arms' argv ('--batch_size 20 -> 40')."""
    names = {t.split("=", 1)[0] for t in [*base_argv, *cand_argv] if t.startswith("-") and WORK_FLAG.search(t.split("=", 1)[0])}
    out = []
    for flag in sorted(names):
        a, b = flag_value(base_argv, flag), flag_value(cand_argv, flag)
        present_a, present_b = flag in base_argv or a is not None, flag in cand_argv or b is not None
        if a != b or present_a != present_b:
            out.append(f"{flag} {a if present_a else '(absent)'} -> {b if present_b else '(absent)'}")
    return out
