"""The import check runs on packages: each module is in the stage of its package, a module in no
stage fails it, and an import against the flow fails `--check` (docs/import_graph.py)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def graph_on(tmp_path, monkeypatch):
    """docs/import_graph.py reading a copy of workflow_lib under tmp_path."""
    spec = importlib.util.spec_from_file_location("import_graph_under_test", ROOT / "docs" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    shutil.copytree(ROOT / "workflow_lib", tmp_path / "workflow_lib", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    return mod, tmp_path / "workflow_lib"


def test_the_tree_passes(graph_on, capsys):
    mod, _ = graph_on
    assert mod.main(["--check"]) == 0
    out = capsys.readouterr().out
    assert "0 import(s) against the flow" in out
    assert "0 import(s) back up to the module's own package or a parent" in out


def test_a_module_in_no_stage_fails(graph_on, capsys):
    mod, pkg = graph_on
    (pkg / "loose.py").write_text("from .core import records\n")
    assert mod.main([]) == 1  # with or without --check
    assert "- workflow_lib.loose" in capsys.readouterr().out


def test_an_import_against_the_flow_fails_check(graph_on, capsys):
    mod, pkg = graph_on
    (pkg / "core" / "leans_on_trials.py").write_text("from ..trials import block\n")
    assert mod.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "workflow_lib.core.leans_on_trials (foundation) imports workflow_lib.trials.block (trials)" in out


def test_each_stage_is_a_package_of_its_own():
    mod = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location(
        "import_graph_stages", ROOT / "docs" / "import_graph.py"))
    spec.loader.exec_module(mod)
    for head, stage in mod.PACKAGES.items():
        assert (ROOT / "workflow_lib" / head / "__init__.py").is_file(), f"{head}/ ({stage}) is not a package"
    loose = sorted(p.stem for p in (ROOT / "workflow_lib").glob("*.py") if p.stem != "__init__")
    assert loose == sorted(m for m in mod.ENTRY if (ROOT / "workflow_lib" / f"{m}.py").exists())


def _graph_module():
    spec = importlib.util.spec_from_file_location("import_graph_docs", ROOT / "docs" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_drawn_graph_is_the_code_s():
    mod = _graph_module()
    drawn = mod.mermaid(mod.graph()) in (ROOT / "docs" / "architecture.md").read_text()
    assert drawn, "docs/architecture.md's graph is out of date: python docs/import_graph.py --write-doc"


def test_the_module_list_is_the_tree_s(graph_on):
    """docs/architecture.md lists every module; one added to the tree is missing from it."""
    mod, pkg = graph_on
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert mod.module_list() in doc, "docs/architecture.md's module list is out of date: python docs/import_graph.py --write-doc"
    (pkg / "compare" / "added.py").write_text('"""A module the list does not have yet."""\n')
    assert "`compare/added.py`: A module the list does not have yet" in mod.module_list()
    assert mod.module_list() not in doc


def test_readme_and_architecture_name_every_package_of_the_tree():
    packages = sorted(p.parent.name for p in (ROOT / "workflow_lib").glob("*/__init__.py"))
    readme = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    arch = (ROOT / "docs" / "architecture.md").read_text().split("## Where each stage lives", 1)[1].split("\n## ", 1)[0]
    assert [p for p in packages if f"`{p}/`" not in readme] == []
    assert [p for p in packages if f"`{p}/" not in arch] == []


def test_every_module_the_architecture_table_names_exists():
    """Each `x.py` in a stage's row is a file of that stage's package (the top level for entry)."""
    import re

    arch = (ROOT / "docs" / "architecture.md").read_text().split("## Where each stage lives", 1)[1].split("\n## ", 1)[0]
    missing = []
    for row in arch.splitlines():
        cells = row.split("|")
        if len(cells) < 4 or cells[1].strip() in ("stage", "---"):
            continue
        pkg = re.match(r"\s*`(\w+)/`", cells[2])
        where = ROOT / "workflow_lib" / (pkg.group(1) if pkg else "")
        missing += [f"{cells[1].strip()}: {n}" for n in re.findall(r"`(\w+\.py)`", cells[2])
                    if not list(where.rglob(n))]
    assert missing == []


def test_no_module_imports_itself_round_a_circle():
    """Module-level import cycles (report/glance.py <-> report/model.py was one): none."""
    mod = _graph_module()
    names = {m for _, m in mod.modules()}
    deps = {m: {d for d in mod.imports_of(p, m) if d in names and d != m} for p, m in mod.modules()}
    for m in names:  # a package's import of its own submodules is how packages load; not a circle
        deps[m] = {d for d in deps[m] if not d.startswith(m + ".")}
    cycles = []
    for start in sorted(names):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for d in sorted(deps[node]):
                if d == start:
                    cycles.append(" -> ".join(path + [d]))
                elif d not in seen and d > start:
                    seen.add(d)
                    stack.append((d, path + [d]))
    assert cycles == []


def test_no_command_imports_another():
    """Commands parse arguments, call a stage and print what report/text.py renders; what two
    commands share belongs to a stage or to the report, not to one of them."""
    mod = _graph_module()
    bad = [(m, d) for p, m in mod.modules() if m.startswith("workflow_lib.commands.")
           for d in mod.imports_of(p, m) if d.startswith("workflow_lib.commands") and d != m]
    assert bad == []


def test_where_new_things_go_names_files_that_exist():
    """The note for newcomers: one line each for a new check, importer, record field and executor,
    and every file it names (but the one to create, written with <...>) is in the tree."""
    import re

    arch = (ROOT / "docs" / "architecture.md").read_text().split("## Where new things go", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in arch.splitlines() if line.startswith("- **")]
    assert [re.match(r"- \*\*A new ([\w ]+)\*\*", line).group(1) for line in lines] == [
        "check", "importer", "record field", "executor"]
    named = {n for line in lines for n in re.findall(r"`([\w./<>-]+\.(?:py|json))`", line) if "<" not in n}
    assert named, "the note names no file"
    bases = [ROOT, ROOT / "workflow_lib", ROOT / "workflow_lib" / "diagnose", ROOT / "workflow_lib" / "trials"]
    missing = sorted(n for n in named if not any((b / n).exists() for b in bases)
                     and not list((ROOT / "workflow_lib").rglob(n)))
    assert missing == []


def test_an_import_back_up_to_the_own_package_fails_check(graph_on, capsys):
    """`from . import atomic` in report/perfetto.py worked only because report/__init__.py had
    imported core.atomic first: a name taken from the own package's __init__ fails --check,
    inside a function too."""
    mod, pkg = graph_on
    (pkg / "report" / "leans_up.py").write_text("def f():\n    from . import atomic\n    return atomic\n")
    assert mod.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "- workflow_lib.report.leans_up imports workflow_lib.report (inside a function)" in out


def test_a_sibling_module_import_is_not_back_up(graph_on, capsys):
    mod, pkg = graph_on
    (pkg / "report" / "sibling.py").write_text("from . import fmt\nfrom .fmt import pct\n")
    mod.main(["--check"])
    assert "workflow_lib.report.sibling" not in capsys.readouterr().out


def test_function_level_imports_are_counted_and_checked(graph_on, capsys):
    """A deferred import is a dependency like any other: counted, and held to the flow."""
    mod, pkg = graph_on
    mod.main(["--check"])
    before = int(re.search(r"(\d+) function-level import", capsys.readouterr().out).group(1))
    (pkg / "core" / "defers.py").write_text("def f():\n    from ..trials import block\n    return block\n")
    assert mod.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert int(re.search(r"(\d+) function-level import", out).group(1)) == before + 1
    assert "workflow_lib.core.defers (foundation) imports workflow_lib.trials.block (trials)" in out


def test_no_benchmark_imports_a_test_module():
    """benchmarks/transfer_batch.py imported tests.reference_diagnosis and four scripts imported
    test builders: they ran only inside the test tree. The builders now live in benchmarks/."""
    assert _graph_module().benchmarks_on_tests() == []


@pytest.mark.parametrize("line", [
    "from tests import reference_diagnosis\n",
    "def f():\n    from tests.fr_builders import job\n",
    "import helper_in_tests\n",  # a bare name, as when tests/ is on sys.path
    "import sys\nfrom pathlib import Path\nsys.path.insert(0, str(Path('.') / \"tests\"))\n",
])
def test_a_benchmark_reaching_into_tests_fails_check(graph_on, capsys, line):
    mod, pkg = graph_on
    (pkg.parent / "tests").mkdir()
    (pkg.parent / "tests" / "helper_in_tests.py").write_text("X = 1\n")
    (pkg.parent / "benchmarks").mkdir()
    (pkg.parent / "benchmarks" / "own_helper.py").write_text("Y = 2\n")
    (pkg.parent / "benchmarks" / "fine.py").write_text("import own_helper\nfrom workflow_lib.core import records\n")
    assert mod.main(["--check"]) == 0
    (pkg.parent / "benchmarks" / "leans.py").write_text(line)
    assert mod.main(["--check"]) == 1
    assert "1 benchmark import(s) of a test module" in capsys.readouterr().out
