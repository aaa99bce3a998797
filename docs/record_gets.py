"""Count the `.get(` calls in workflow_lib/diagnose, compare and report, and say which read a record.

    python docs/record_gets.py               # the counts by stage, and every .get( on a record
    python docs/record_gets.py --rev REV     # the same for the tree of a git revision (before/after)
    python docs/record_gets.py --list        # every call with its class
    python docs/record_gets.py --check       # exit 1 on a fallback, an unclassified call, a record
                                             # .get( with no reason, or a reason no call uses

Issue 37 asks that readers of records hold no `.get()` fallbacks: a field every version of a
record requires is read directly (`rec["field"]`, or `rec.field` on a typed record), and a field
an older version lacks is filled once, in records.upgrade. What remains is a `.get(` on a field
the schema leaves optional, and `.get(` on things that are not records at all.

How a call is classified (read from the code with `ast`, never by running it):

1. The receiver is normalised: `X or {}` / `X or []` is X, so `(m.get("a") or {}).get("b")`
   reads as `m.get('a').get('b')`.
2. `code`: the receiver is a constant table or cache of the code (an UPPER_CASE or `_UPPER`
   name, or a dict literal).
3. `built`: an accumulator, `d[k] = d.get(k, 0) + ...` (the counter the function builds).
4. Otherwise the first rule of RULES whose file (under workflow_lib/), function (None: any) and
   receiver regex match says what the receiver is: `built` (a value this run makes: evidence,
   view models, option maps, the reader's own maps of records keyed by block) with why, or a
   record part (`plan.design.metric`, `execution.runs[]`, ...): a value read from a stored
   record. The rules name receivers as the code names them; a name that means two things in
   one file gets a function in its rule.
5. A call that no rule matches is `unclassified`; --check fails on it, so a new `.get(` is
   classified when it is written.

A `.get(` on a record part is `optional` when ALLOWED lists (part, field) with why the field may
be absent: the schema leaves it out of `required` (--check reads the schema at PARTS' path and
fails when it does require it), the part is a map keyed by data (field `*`: a source name, a
block id), or the reader is the one place an older version is read. Any other `.get(` on a
record is a `fallback`: the count issue 37 drives down.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("diagnose", "compare", "report")

# Record parts: where each lives in its schema (kind, path of keys; "[]" steps into array items,
# "*" into a map's values). A part of a free-form object (plan.environment, an arm's changes, a
# source's detail) has no path below which the schema names fields.
PARTS = {
    "plan.design": ("plan", ["design"]),
    "plan.design.metric": ("plan", ["design", "metric"]),
    "plan.design.metric.shape": ("plan", ["design", "metric", "shape"]),
    "plan.arms.*.changes": ("plan", ["arms", "candidate", "changes"]),
    "plan.environment": ("plan", ["environment"]),
    "execution.runs[]": ("execution", ["runs", "[]"]),
    "execution.runs[].alternates": ("execution", ["runs", "[]", "alternates"]),
    "preflight.missing[]": ("preflight", ["missing", "[]"]),
    "snapshot": ("snapshot", []),
    "snapshot.sources": ("snapshot", ["sources"]),
    "incident_manifest": ("incident_manifest", []),
    "incident_manifest.sources": ("incident_manifest", ["sources"]),
    "incident_manifest.sources.*": ("incident_manifest", ["sources", "*"]),
    "incident_manifest.sources.*.detail": ("incident_manifest", ["sources", "*", "detail"]),
    "collectives": ("collectives", []),
    "collectives.summary": ("collectives", ["summary"]),
    "collectives.culprits[]": ("collectives", ["culprits", "[]"]),
    "collectives.clock_domains[]": ("collectives", ["clock_domains", "[]"]),
    "diagnosis.summary (versions 1-2)": ("diagnosis", ["summary"]),
    "diagnosis.summary.by_check": ("diagnosis", ["summary", "by_check"]),
    "diagnosis.steps[] (versions 1-2)": None,  # steps left the record in version 3 (the tables)
}

# (file under workflow_lib/, function or None, receiver regex, part or "built: why"). First match wins.
RULES = [
    # compare
    ("compare/build.py", "_successful_values", r"arm_of", "built: index -> arm of the plan's schedule, made here"),
    ("compare/build.py", "_excluded", r"kw", "built: the function's keyword arguments"),
    ("compare/build.py", None, r"design|plan\.design", "plan.design"),
    ("compare/build.py", None, r"metric|(plan\.)?design\.metric", "plan.design.metric"),
    ("compare/build.py", None, r"r|run", "execution.runs[]"),
    ("compare/build.py", "work_difference", r"work\['[AB]'\]", "built: each arm's work per step, made here from the runs"),
    (r"compare/(build|looks)\.py", None, r"executions", "built: the reader's map block id -> Execution (a block may have none)"),
    ("compare/build.py", None, r"excluded|reasons", "built: a count this function makes"),
    ("compare/by_component.py", "runs_by_arm", r"run", "execution.runs[]"),
    ("compare/by_component.py", None, r"rows|by|row|wall", "built: the component estimates made here"),
    (r"compare/(job_metrics|recompare)\.py", None, r"run\.alternates", "execution.runs[].alternates"),
    (r"compare/(job_metrics|recompare)\.py", None, r"run", "execution.runs[]"),
    ("compare/job_metrics.py", None, r"rates", "built: steps per second by role, made here"),
    (r"compare/(job_metrics|recompare)\.py", None, r"metric", "plan.design.metric"),
    ("compare/job_metrics.py", "bound_warning", r"shape", "plan.design.metric.shape"),
    # report
    ("report/fmt.py", "changes", r"ch", "plan.arms.*.changes"),
    ("report/glance.py", "verdict_text", r"v", "built: verdict()'s view"),
    ("report/html.py", "_reason", r"sources", "snapshot.sources"),
    (r"report/(html|text)\.py", None, r"snap", "snapshot"),
    ("report/html.py", "timeline_section", r"m", "built: the report's view model"),
    ("report/html.py", "_design", r"unit", "built: the unit of each design field, a literal in the function"),
    ("report/html.py", "plan_section", r"x", "preflight.missing[]"),
    (r"report/(html_glance|text)\.py", None, r"x|g", "built: the first screen's view (glance.build)"),
    ("report/model.py", "trial_runs", r"executions", "built: the reader's map block id -> Execution (a block may have none)"),
    ("report/model.py", "environment_rows", r"env", "plan.environment"),
    ("report/glance.py", "first_calls", r"diag\.summary\.by_check", "diagnosis.summary.by_check"),
    ("report/text.py", "diagnosis_lines", r"s\.by_check", "diagnosis.summary.by_check"),
    ("report/plots.py", None, r"block_medians", "built: medians per block, made from the comparison here"),
    ("report/text.py", "_plan", r"counts", "built: a count this function makes"),
    ("report/text.py", "_hang_lines", r"record", "collectives"),
    ("report/text.py", "_hang_lines", r"c", "collectives.culprits[]"),
    ("report/text.py", "_clock_line", r"d", "collectives.clock_domains[]"),
    ("report/timeline.py", None, r"extra_col", "built: the track's extra columns, made here"),
    # diagnose: the rank's evidence (evidence.RankInput, in memory from the snapshot's tables),
    # caches, and what the checks and the summary make in this run
    ("diagnose/measures.py", "_sweep_py", r"ev", "built: the sweep's boundary events, a dict made here"),
    ("diagnose/", None, r"(ci\.rank\.)?ev(\.\w+)?", "built: the rank's evidence in memory (evidence.RankInput), from the snapshot's tables"),
    ("diagnose/", None, r"f\['evidence'\]", "built: a finding's evidence, made by a check in this run"),
    ("diagnose/checks/collective_wait.py", "claim", r"f", "built: the collectives analysis' finding for one step (claims.py, in memory)"),
    ("diagnose/checks/host_submission.py", None, r"detail|state_ns|span_ns", "built: made in the check"),
    (r"diagnose/checks/(checkpoint_stall|transfer_stall)\.py", None, r"names|b|b\['direction'\]|best|out", "built: made in the check"),
    ("diagnose/columns.py", None, r"spans\[j\]|cols\.kinds_ns|acc\['kinds'\]|totals", "built: sums made over this rank's columns"),
    (r"diagnose/(describe|job)\.py", None, r"coll(\.get\(.*\))?", "built: the collectives analysis' claims by (rank, step), in memory"),
    ("diagnose/job.py", None, r"role|cause|dig(\[\w+\])?.*|out|weight", "built: the job's per-rank digests and maps, made in this run"),
    ("diagnose/next_experiments.py", None, r"kinds|b", "built: sums over the findings' evidence, made here"),
    ("diagnose/dump_only.py", None, r"analysis", "collectives"),
    ("diagnose/dump_only.py", None, r"s", "collectives.summary"),
    ("diagnose/engine.py", "gpu_covered", r"manifest", "incident_manifest"),
    (r"diagnose/(engine|evidence)\.py", None, r"(inc\.)?manifest(\['sources'\]|\.get\('sources'\))", "incident_manifest.sources"),
    (r"diagnose/(engine|evidence)\.py", None, r"(inc\.)?manifest(\['sources'\]|\.get\('sources'\))\.get\('cupti'\)", "incident_manifest.sources.*"),
    (r"diagnose/(engine|evidence)\.py", None, r"detail|d", "incident_manifest.sources.*.detail"),
    ("diagnose/evidence.py", None, r"(inc\.)?manifest", "incident_manifest"),
    ("diagnose/step_tables.py", None, r"st|f", "diagnosis.steps[] (versions 1-2)"),
    ("diagnose/stored.py", None, r"body\['summary'\]", "diagnosis.summary (versions 1-2)"),
    ("diagnose/types.py", "from_config", r"section", "built: the workflow config's diagnose section (a map of settings, not a record)"),
]

# (part, field) -> why the field may be absent. "*": the part is a map keyed by data.
ALLOWED = {
    ("plan.arms.*.changes", "*"): "free-form: the config's candidate changes (set_args, env, ...), each optional",
    ("plan.environment", "*"): "free-form: the environment fingerprint; _not_observed only where something was not",
    # plan.design is a typed Design since issue 37 (stop, record_runs, run_timeout_s: attributes, ABSENT
    # when left out); its metric a PlanMetric with its JobShape (per, cpu_wait, shape, job, role,
    # ranks, step_pattern, bound_role, wait_share: attributes, ABSENT when left out)
    # plan.arms is a typed Arms since issue 37 (same_as_baseline and sources read as attributes)
    # execution.runs[] is a typed Run since issue 37 (its capture, components and ranks read as
    # attributes, ABSENT where optional); its alternates stay a map keyed by data
    ("execution.runs[].alternates", "*"): "a map keyed by job-metric name; a run may lack one",
    ("preflight.missing[]", "problem"): "optional: a missing artifact with no further problem",
    ("snapshot", "producer"): "optional in the snapshot schema (an incident that does not say what wrote it)",
    ("snapshot.sources", "*"): "a map keyed by source name; a source may be absent",
    ("incident_manifest", "producer"): "optional in the manifest schema",
    ("incident_manifest.sources", "*"): "a map keyed by source name; a source may be absent",
    ("incident_manifest.sources.*", "detail"): "optional: a source that says nothing of itself",
    ("incident_manifest.sources.*.detail", "*"): "free-form: what the source says of itself (cupti: windows, losses)",
    ("collectives", "hung_on"): "required in version 2 (the schema's allOf), absent in version 1, which "
                                "collectives_summary_lines still prints (tests/test_collectives_cli.py)",
    ("collectives", "culprit_order"): "as hung_on: absent in version 1, which text.py still prints",
    ("collectives", "culprits"): "as hung_on: absent in version 1, which text.py still prints",
    ("collectives.summary", "pending"): "not in the summary's required counts (version 1 has none)",
    ("collectives.culprits[]", "ops_affected"): "required in a collectives record, absent in a diagnosis' collectives "
                                                "block, which _hang_lines also reads (text.py says so)",
    ("collectives.clock_domains[]", "rank"): "optional in the schema",
    ("collectives.clock_domains[]", "hostname"): "not in the schema's properties: written when known",
    ("diagnosis.summary.by_check", "*"): "a map keyed by check name: a diagnosis made before a check existed "
                                         "has no entry for it (first_call's, 2026-12-04)",
    ("diagnosis.summary (versions 1-2)", "slow_steps"): "absent in version 1: load_diagnosis, the one place versions 1-3 are read",
    ("diagnosis.steps[] (versions 1-2)", "step_id"): "an error message for a step that failed the key check",
    ("diagnosis.steps[] (versions 1-2)", "excess"): "absent in version 1 (read only by load_diagnosis's conversion)",
    ("diagnosis.steps[] (versions 1-2)", "share_of_excess"): "absent in version 1",
    ("diagnosis.steps[] (versions 1-2)", "at"): "absent before version 4",
}
# Allowed though the newest version requires them: report/text.py's _hang_lines reads a
# diagnosis' collectives block and version 1 collectives records with the same code.
SCHEMA_EXEMPT = {("collectives.culprits[]", "ops_affected"), ("collectives", "hung_on"), ("collectives", "culprit_order"),
                 ("collectives", "culprits")}

_UPPER = re.compile(r"_?[A-Z][A-Z0-9_]*$")


def _norm(node: ast.AST) -> ast.AST:
    """`X or {}` / `X or []` -> X, inside the whole receiver."""

    class Strip(ast.NodeTransformer):
        def visit_BoolOp(self, n):
            self.generic_visit(n)
            if isinstance(n.op, ast.Or) and len(n.values) == 2 and isinstance(n.values[1], (ast.Dict, ast.List)) \
                    and not getattr(n.values[1], "keys", getattr(n.values[1], "elts", None)):
                return n.values[0]
            return n

    import copy
    return Strip().visit(copy.deepcopy(node))


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def calls(path: str, source: str):
    """(line, function, receiver text, field text, accumulator?) of every `.get(` call."""
    tree = ast.parse(source)
    out = []

    def visit(node, func, parent_assign):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            pa = child if isinstance(child, (ast.Assign, ast.AugAssign)) else parent_assign
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr == "get":
                recv = _norm(child.func.value)
                text = ast.unparse(recv)
                field = child.args[0].value if child.args and isinstance(child.args[0], ast.Constant) and \
                    isinstance(child.args[0].value, str) else "*"
                acc = pa is not None and any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == text
                                             for t in getattr(pa, "targets", [getattr(pa, "target", None)]))
                out.append((child.lineno, f, text, field, acc, recv))
            visit(child, f, pa)

    visit(tree, None, None)
    return out


def classify(rel: str, func: str | None, text: str, acc: bool, recv: ast.AST) -> tuple[str, str]:
    """(class, part or why): class is code, built, record or unclassified."""
    root = _root_name(recv)
    if isinstance(recv, ast.Dict) or (root and _UPPER.match(root) and text == root):
        return "code", "a constant table or cache of the code"
    if acc:
        return "built", "an accumulator this function makes"
    for file_re, fn, recv_re, what in RULES:
        if re.fullmatch(file_re if file_re.endswith((".py", r"\.py")) else file_re + ".*", rel) \
                and (fn is None or fn == func) and re.fullmatch(recv_re, text):
            if what.startswith("built: "):
                return "built", what[len("built: "):]
            return "record", what
    return "unclassified", ""


def files_at(rev: str | None):
    """(path under workflow_lib/, source) of every module of the counted stages."""
    if rev is None:
        for stage in STAGES:
            for p in sorted((ROOT / "workflow_lib" / stage).rglob("*.py")):
                yield str(p.relative_to(ROOT / "workflow_lib")), p.read_text(encoding="utf-8")
        return
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev, "--",
                            *(f"workflow_lib/{s}" for s in STAGES)], check=True, capture_output=True, text=True).stdout.split()
    for n in sorted(x for x in names if x.endswith(".py")):
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{n}"], check=True, capture_output=True, text=True).stdout
        yield n[len("workflow_lib/"):], src


def _schema(kind: str, rev: str | None) -> dict:
    if rev is None:
        return json.loads((ROOT / "schemas" / f"{kind}.schema.json").read_text(encoding="utf-8"))
    return json.loads(subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:schemas/{kind}.schema.json"],
                                     check=True, capture_output=True, text=True).stdout)


def _object(node):
    if isinstance(node, dict) and "oneOf" in node:  # a nullable object: its object branch
        return next((b for b in node["oneOf"] if b.get("type") == "object"), node)
    return node


def required(part: str, rev: str | None = None, _cache: dict = {}) -> set[str] | None:
    """The fields the schema (at `rev`) requires of a record part in its newest version: the
    part's own `required` and, where the root's `allOf` requires more of the newest version
    (`if: schema_version const N, then: ...`), those too. None: the part has no schema place."""
    if PARTS.get(part) is None:
        return None
    kind, path = PARTS[part]
    key = (kind, rev)
    if key not in _cache:
        _cache[key] = _schema(kind, rev)
    root = _cache[key]
    versions = root["properties"]["schema_version"].get("enum") or [root["properties"]["schema_version"].get("const")]
    branches = [root] + [a["then"] for a in root.get("allOf", [])
                         if a.get("if", {}).get("properties", {}).get("schema_version", {}).get("const") == max(versions)]
    out: set[str] | None = None
    for node in branches:
        for k in path:
            node = _object(node)
            node = node.get("items") if k == "[]" else node.get("additionalProperties") if k == "*" \
                else node.get("properties", {}).get(k)
            if not isinstance(node, dict):
                break
        else:
            out = (out or set()) | set(_object(node).get("required", []))
    return out


def rows_of(rel: str, source: str, rev: str | None = None) -> list[dict]:
    """Every `.get(` call of one module (`rel`: its path under workflow_lib/) with its class:
    code, built, optional, unlisted, fallback or unclassified (schemas read at `rev`, None: the
    tree). A record .get( is a fallback when the schema requires the field in the newest version
    (what a reader sees after records.upgrade), whatever ALLOWED says, unless SCHEMA_EXEMPT names
    it; optional when ALLOWED says why; unlisted when only the schema leaves it optional (no
    reason written); a fallback where the part has no schema place to ask and no reason."""
    rows = []
    for line, func, text, field, acc, recv in calls(rel, source):
        cls, what = classify(rel, func, text, acc, recv)
        key = None
        if cls == "record":
            req = required(what, rev)
            key = (what, field) if (what, field) in ALLOWED else (what, "*")
            why = ALLOWED.get(key)
            if field != "*" and req is not None and field in req and (what, field) not in SCHEMA_EXEMPT:
                cls, why = "fallback", "the schema requires it"
            elif why:
                cls = "optional"
            elif req is not None and field != "*":
                cls, why = "unlisted", "optional by the schema; say why in ALLOWED"
            else:
                cls = "fallback"
            what = f"{what} {field}" + (f": {why}" if why else "")
        rows.append({"stage": rel.split("/")[0], "where": f"{rel}:{line}", "func": func, "receiver": text,
                     "field": field, "class": cls, "what": what, "allowed": key if cls == "optional" else None})
    return rows


def survey(rev: str | None = None) -> list[dict]:
    return [row for rel, src in files_at(rev) for row in rows_of(rel, src, rev)]


def stale(rows: list[dict]) -> list[tuple[str, str]]:
    """ALLOWED entries no call uses any more (a reader that now indexes the field)."""
    used = {r["allowed"] for r in rows}
    return sorted(k for k in ALLOWED if k not in used)


def table(rows: list[dict]) -> str:
    n = Counter((r["stage"], r["class"]) for r in rows)
    out = ["| stage | .get( | on records: fallback | on records: optional by schema | not records (built, code) | unclassified |",
           "|---|---|---|---|---|---|"]
    for s in (*STAGES, "all"):
        pick = (lambda c: sum(n[(x, c)] for x in STAGES)) if s == "all" else (lambda c, s=s: n[(s, c)])
        total = sum(pick(c) for c in ("fallback", "optional", "unlisted", "built", "code", "unclassified"))
        unl = f" ({pick('unlisted')} without a reason)" if pick("unlisted") else ""
        out.append(f"| {s} | {total} | {pick('fallback')} | {pick('optional') + pick('unlisted')}{unl} | "
                   f"{pick('built') + pick('code')} | {pick('unclassified')} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="count in this git revision's tree instead of the working tree")
    ap.add_argument("--list", action="store_true", help="every call with its class")
    ap.add_argument("--check", action="store_true", help="exit 1 on a fallback, an unclassified call or an allowed field the schema requires")
    args = ap.parse_args(argv)
    rows = survey(args.rev)
    print(table(rows))
    shown = rows if args.list else [r for r in rows if r["class"] in ("fallback", "unclassified", "unlisted", "optional")]
    for r in shown:
        print(f"- {r['class']}: {r['where']} ({r['func']}) {r['receiver']}.get({r['field']!r}) {r['what']}")
    if args.rev is None:
        for part, field in stale(rows):
            print(f"- ALLOWED entry no call uses: {part} {field}")
    fails = [r for r in rows if r["class"] in ("fallback", "unclassified", "unlisted")]
    return 1 if args.check and (fails or (args.rev is None and stale(rows))) else 0


if __name__ == "__main__":
    sys.exit(main())
