"""Draw workflow_lib's import graph by stage and list every arrow that runs against the flow.

    python docs/import_graph.py            # Mermaid graph + the arrows against the flow (stdout)
    python docs/import_graph.py --check    # exit 1 when any arrow runs against the flow, or an
                                           # import runs back up to its own package or a parent
    python docs/import_graph.py --write-doc  # redraw the graph and the module list in docs/architecture.md

A module belongs to the stage of its package (`workflow_lib/<stage>/`, `workflow_lib/core/` for
the foundation) or, at the top level, to `entry` when ENTRY names it. Any other module is in
no stage and fails the run (with or without --check): the map never guesses.

The graph is read from the code (every `import`/`from ... import` in workflow_lib, inside
functions too, since a deferred import is still a dependency: they are counted and listed
with the rest, and the run prints how many there are). An import that runs back up, to the
module's own package or a parent (`from . import atomic` in report/perfetto.py, where atomic is
a name report/__init__.py happens to import first), fails --check: it works only by import
order. Each module belongs to one
stage; a stage may import from its own stage and from stages before it in the flow

    foundation → capture | importers → snapshot → collectives → diagnose → plan → preflight
    → trials → compare → report → entry

Collectives comes before the diagnosis, as in the rules: the `collectives` rule writes its
record from the snapshot and the `diagnose` rule reads it (rules/diagnose.smk).

`foundation` holds what every stage shares (errors, records, the store, the incident format,
the vocabulary); `entry` holds the CLI, which wires stages together.

Benchmarks sit beside the flow: a script in benchmarks/ may import workflow_lib and benchmarks/,
never tests/ (`from tests import ...`, a bare name of a module in tests/, or tests/ put on
sys.path) fails --check: a benchmark that leans on a test module rots when the tests move, and
runs only inside the test tree. Tests may import benchmarks' helpers (the synthetic incidents,
dumps, plans and traces live there, once).
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "workflow_lib"

# Stage rank by flow position; capture and importers are two entries into the same place.
ORDER = {"foundation": 0, "capture": 1, "importers": 1, "snapshot": 2, "collectives": 3, "diagnose": 4,
         "plan": 5, "preflight": 6, "trials": 7, "compare": 8, "report": 9, "entry": 10}

# The map, by package: workflow_lib/<stage>/ is its stage, workflow_lib/core/ the foundation, and
# these top-level modules and packages are the entry code that wires stages together.
PACKAGES = {**{stage: stage for stage in ORDER if stage not in ("foundation", "entry")}, "core": "foundation"}
ENTRY = {"cli", "commands", "missing_incident", "public"}


class Unmapped(Exception):
    """A module in no stage: a new loose module, or a package the map does not name."""


def stage_of(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "foundation"  # workflow_lib/__init__.py: the version, nothing else
    head = parts[0]
    if head in PACKAGES:
        return PACKAGES[head]
    if head in ENTRY:
        return "entry"
    raise Unmapped(module)


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_sites(path: Path, module: str) -> list[tuple[str, bool, bool, int]]:
    """Every workflow_lib import in the file as (target, deferred, back_up, line): `deferred` when it sits
    inside a function or class (it is still a dependency, only paid for later), `back_up` when it
    reaches the module's own package or a parent (its `__init__`: `from . import atomic` where
    atomic is no submodule, `from .. import x`), which only works when that package has finished
    importing first. A package's `from . import sub` of its own submodule goes down, not up."""
    is_pkg = path.name == "__init__.py"
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    parents = {".".join(module.split(".")[:i]) for i in range(1, len(module.split(".")))}
    if is_pkg:
        parents.add(module)  # a package's own __init__ importing a name of itself
    found: list[tuple[str, bool, bool, int]] = []
    for node, deferred in _import_nodes(path.read_text(encoding="utf-8"), str(path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PKG):
                    found.append((a.name, deferred, a.name in parents, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith(PKG):
                continue
            subs = []
            for a in node.names:  # `from . import plan` names a module
                cand = f"{target}.{a.name}"
                if _is_module(cand):
                    subs.append(cand)
            if target in parents and len(subs) < len(node.names):
                found.append((target, deferred, True, node.lineno))  # a name out of a parent's __init__
            elif not subs or target not in parents:
                found.append((target, deferred, False, node.lineno))
            found += [(cand, deferred, False, node.lineno) for cand in subs]
    return found


@functools.lru_cache(maxsize=None)
def _import_nodes(text: str, filename: str) -> tuple[tuple[ast.Import | ast.ImportFrom, bool], ...]:
    """The file's import statements, each with whether it sits inside a function, class or lambda:
    one pass over the tree, and once per text (a check asks for each file's imports four times;
    walking each definition's subtree again for every enclosing one took seconds). What the
    imports resolve to is worked out per call: files may appear between calls."""
    found, todo = [], [(ast.parse(text, filename=filename), False)]
    while todo:
        node, inside = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, inside))
        inner = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
    return tuple(found)


def _is_module(dotted: str) -> bool:
    """A module or package file, or a C extension built from a source beside it (capture/_spanext.c)."""
    where = ROOT / Path(*dotted.split("."))
    return where.with_suffix(".py").exists() or where.is_dir() or where.with_suffix(".c").exists()


def imports_of(path: Path, module: str) -> set[str]:
    return {target for target, _, _, _ in import_sites(path, module)}


def deferred_imports() -> list[tuple[str, int]]:
    """(module, line) of every workflow_lib import statement inside a function or class."""
    return sorted({(mod, line) for path, mod in modules() for _, deferred, _, line in import_sites(path, mod) if deferred})


def back_up_imports() -> list[tuple[str, str, bool]]:
    """(module, package, deferred) of every import that reaches the module's own package or a parent."""
    return sorted({(mod, t, deferred) for path, mod in modules() for t, deferred, up, _ in import_sites(path, mod) if up})


def modules() -> list[tuple[Path, str]]:
    return [(path, module_name(path)) for path in sorted((ROOT / PKG).rglob("*.py"))]


def unmapped() -> list[str]:
    """Modules (and the modules they import) that belong to no stage in the map."""
    out = set()
    for path, mod in modules():
        for name in (mod, *imports_of(path, mod)):
            try:
                stage_of(name)
            except Unmapped:
                out.add(name)
    return sorted(out)


def graph() -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(stage_from, stage_to) -> {(module_from, module_to)} over all of workflow_lib."""
    edges: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for path, mod in modules():
        for dep in imports_of(path, mod):
            a, b = stage_of(mod), stage_of(dep)
            if a != b:
                edges[(a, b)].add((mod, dep))
    return edges


def against_flow(edges) -> list[tuple[str, str, str, str]]:
    """Imports of a later stage, or of a sibling entry (capture and importers share a rank but
    neither may lean on the other: what both need belongs in foundation)."""
    return sorted((a, b, m, d) for (a, b), pairs in edges.items() if ORDER[b] >= ORDER[a] for m, d in pairs)


def mermaid(edges) -> str:
    lines = ["```mermaid", "flowchart LR"]
    for (a, b), pairs in sorted(edges.items()):
        style = "-.->" if ORDER[b] >= ORDER[a] else "-->"  # dotted: against the flow
        lines.append(f"  {a} {style}|{len(pairs)}| {b}")
    lines.append("```")
    return "\n".join(lines)


def _summary(path: Path) -> str:
    """A module's first docstring sentence: what it is for, as the module says it."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n", 1)[0].split())
    first = re.split(r"(?<=[a-z0-9)\]`'\"])\.\s+(?=[A-Z`(\[])", para, maxsplit=1)[0].rstrip(".")
    return first if len(first) <= 160 else first[:first.rfind(" ", 0, 157)] + " …"


def module_list() -> str:
    """Every module of workflow_lib by stage, in flow order, with its first docstring sentence:
    the layout as the tree has it (docs/architecture.md keeps it between the markers)."""
    by_stage: dict[str, list[str]] = defaultdict(list)
    for path, mod in modules():
        rel = path.relative_to(ROOT / PKG).as_posix()
        if path.name == "__init__.py":  # a package: its directory (workflow_lib/ itself at the top)
            shown = rel[: -len("__init__.py")] or f"{PKG}/"
        else:
            shown = rel
        by_stage[stage_of(mod)].append(f"  - `{shown}`: {_summary(path) or '(no docstring)'}")
    lines = [MODULES_BEGIN]
    for stage in sorted(by_stage, key=lambda s: (ORDER[s], s)):
        lines.append(f"- **{stage}**")
        lines += by_stage[stage]
    lines.append(MODULES_END)
    return "\n".join(lines)


def benchmarks_on_tests() -> list[tuple[str, int, str]]:
    """(file, line, what) for each place a benchmark reaches into tests/: an import of `tests`, of a
    module only tests/ holds (by bare name, as when tests/ is on sys.path), or tests/ put on sys.path."""
    bench, tests = ROOT / "benchmarks", ROOT / "tests"
    if not bench.is_dir():
        return []
    ours = {p.stem for p in bench.iterdir()}
    theirs = {p.stem for p in tests.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()} - ours \
        if tests.is_dir() else set()
    found = []
    for path in sorted(bench.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            heads = []
            if isinstance(node, ast.Import):
                heads = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                heads = [node.module]
            for name in heads:
                if name.split(".")[0] in {"tests"} | theirs:
                    found.append((path.name, node.lineno, f"imports {name}"))
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("insert", "append")
                    and "sys.path" in ast.unparse(node.func.value)
                    and any(isinstance(c, ast.Constant) and c.value == "tests" for c in ast.walk(node))):
                found.append((path.name, node.lineno, "puts tests/ on sys.path"))
    return found


DOC = ROOT / "docs" / "architecture.md"
MODULES_BEGIN = "<!-- every module, drawn from the tree: python docs/import_graph.py --write-doc -->"
MODULES_END = "<!-- end of the module list -->"


def write_doc(edges) -> None:
    """Replace the Mermaid block and the module list of docs/architecture.md with what the code has."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("```mermaid")
    end = text.index("```", start + 3) + 3
    text = text[:start] + mermaid(edges) + text[end:]
    start = text.index(MODULES_BEGIN)
    end = text.index(MODULES_END) + len(MODULES_END)
    DOC.write_text(text[:start] + module_list() + text[end:], encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-doc", action="store_true", help="redraw the graph and the module list in docs/architecture.md")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when an arrow runs against the flow, an import runs back up to its own package, "
                         "a benchmark imports a test module, or a module is in no stage")
    args = ap.parse_args(argv)
    missing = unmapped()
    if missing:
        print(f"{len(missing)} module(s) in no stage (move them into a stage package, or name them in "
              "docs/import_graph.py's PACKAGES / ENTRY):")
        for m in missing:
            print(f"- {m}")
        return 1
    edges = graph()
    bad = against_flow(edges)
    up = back_up_imports()
    deferred = deferred_imports()
    if args.write_doc:
        write_doc(edges)
    print(mermaid(edges))
    print()
    print(f"{len(bad)} import(s) against the flow" + (":" if bad else ""))
    for a, b, m, d in bad:
        print(f"- {m} ({a}) imports {d} ({b})")
    by_stage: dict[str, int] = defaultdict(int)
    for m, _ in deferred:
        by_stage[stage_of(m)] += 1
    print(f"{len(deferred)} function-level import(s), counted with the rest"
          + (" (" + ", ".join(f"{s} {n}" for s, n in sorted(by_stage.items())) + ")" if deferred else ""))
    print(f"{len(up)} import(s) back up to the module's own package or a parent" + (":" if up else ""))
    for m, d, inside in up:
        print(f"- {m} imports {d}" + (" (inside a function)" if inside else ""))
    rot = benchmarks_on_tests()
    print(f"{len(rot)} benchmark import(s) of a test module" + (":" if rot else ""))
    for f, line, what in rot:
        print(f"- benchmarks/{f}:{line} {what}")
    return 1 if (args.check and (bad or up or rot)) else 0


if __name__ == "__main__":
    sys.exit(main())
