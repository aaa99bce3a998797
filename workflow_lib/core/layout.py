"""The results tree: the one place that says where each record lives.

    <results>/cas/blake3/xx/<62 hex>            the content-addressed store
    <results>/<incident>/snapshot.json          per incident (whatever is planned on it)
    <results>/<incident>/diagnosis.json
    <results>/<incident>/diagnosis.{steps,findings}.parquet   its per-step tables (diagnosis_tables)
    <results>/<incident>/experiments.json       experiment names bound to environments
    <results>/<incident>/logs/{snapshot,diagnose}.log
    <results>/<incident>/runs/<run>/            one per plan: an A/A, an A/B and each named
        plan.json, preflight/<block>.json,       experiment have their own and never
        execution/<block>.json, comparison.json, overwrite each other
        looks/<wave>.json (stop: early),
        report.html, trace.perfetto.json, work/<block>/, logs/,
        made.json (only when the comparison was made: what latest may move to)
    <results>/<incident>/latest.json            which run is the latest (a record)
    <results>/<incident>/latest -> runs/<run>   the same, as a link
    <results>/<incident>/{plan.json, comparison.json, report.html, trace.perfetto.json,
        preflight, execution} -> latest/<name>  so results/<incident>/report.html is the latest

A run's key names what was planned: `aa-`, `ab-` or `exp-` (a named experiment) and 12
hex digits of the digest of the plan's inputs (candidate, including a patch's bytes;
trial design; experiment; source repository). Snakemake needs the path before the plan
exists, so the key is made from what makes the plan, not from the plan's own digest.

Every function takes the parts as strings and joins them with "/", so Snakemake
wildcards ("{incident}") pass through unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import records
from .cas import hash_file
from .errors import StallcaseError
from .types import Latest

RUNS = "runs"
LATEST = "latest"
LATEST_RECORD = "latest.json"
REGISTRY = "experiments.json"
RUN_KEY_PATTERN = r"(aa|ab|exp)-[0-9a-f]{12}"
# What results/<incident>/ shows of the latest run, by link.
LATEST_NAMES = ("plan.json", "comparison.json", "report.html", "trace.perfetto.json", "preflight", "execution")


# Written by stages for people, not contracts between stages: logs and trial work dirs.
NOT_RECORDS = ("logs", "work")


def holds_records(rel_parts: tuple[str, ...]) -> bool:
    """Whether a file at `rel_parts` under results/<incident>/ can be a stage record (verify)."""
    top = rel_parts[2:] if rel_parts[:1] == (RUNS,) and len(rel_parts) > 2 else rel_parts
    return not (len(top) > 1 and top[0] in NOT_RECORDS)


def incident_dir(results: str, incident: str) -> str:
    return f"{results}/{incident}"


def snapshot(results: str, incident: str) -> str:
    return f"{incident_dir(results, incident)}/snapshot.json"


def diagnosis(results: str, incident: str) -> str:
    return f"{incident_dir(results, incident)}/diagnosis.json"


DIAGNOSIS_TABLES = ("steps", "findings")


def diagnosis_tables(record_path: str | os.PathLike) -> dict[str, str]:
    """The per-step tables beside a diagnosis record (any path: `stallcase diagnose -o` too),
    named by the record's stem: diagnosis.json -> diagnosis.steps.parquet, diagnosis.findings.parquet."""
    p = os.fspath(record_path)
    name = p.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name  # as Path.stem: ".hidden" keeps its dot
    return {t: f"{p[:len(p) - len(name)]}{stem}.{t}.parquet" for t in DIAGNOSIS_TABLES}


def collectives(results: str, incident: str) -> str:
    return f"{incident_dir(results, incident)}/collectives.json"


def incident_log(results: str, incident: str, name: str) -> str:
    return f"{incident_dir(results, incident)}/logs/{name}"


def registry(results: str, incident: str) -> str:
    return f"{incident_dir(results, incident)}/{REGISTRY}"


def latest_record(results: str, incident: str) -> str:
    return f"{incident_dir(results, incident)}/{LATEST_RECORD}"


def latest(results: str, incident: str, name: str) -> str:
    """results/<incident>/<name>: the latest run's record of that name, by link (LATEST_NAMES)."""
    if name not in LATEST_NAMES:
        raise ValueError(f"{name!r} is not one of the latest run's links {LATEST_NAMES}")
    return f"{incident_dir(results, incident)}/{name}"


def run_dir(results: str, incident: str, run: str) -> str:
    return f"{incident_dir(results, incident)}/{RUNS}/{run}"


def plan(results: str, incident: str, run: str) -> str:
    return f"{run_dir(results, incident, run)}/plan.json"


def preflight(results: str, incident: str, run: str, block: str) -> str:
    return f"{run_dir(results, incident, run)}/preflight/{block}.json"


def execution(results: str, incident: str, run: str, block: str) -> str:
    return f"{run_dir(results, incident, run)}/execution/{block}.json"


def look(results: str, incident: str, run: str, wave: str) -> str:
    """A sequential design's look after one wave of blocks (compare/looks.py)."""
    return f"{run_dir(results, incident, run)}/looks/{wave}.json"


def comparison(results: str, incident: str, run: str) -> str:
    return f"{run_dir(results, incident, run)}/comparison.json"


def made(results: str, incident: str, run: str) -> str:
    """The mark of a run that made its comparison (core/types.py Made); absent when it could not."""
    return f"{run_dir(results, incident, run)}/made.json"


def made_log(results: str, incident: str, run: str) -> str:
    """Rule `made`'s log: its error is the end line of a run that made no comparison (report/terminal.py)."""
    return run_log(results, incident, run, "made.log")


def report(results: str, incident: str, run: str) -> str:
    return f"{run_dir(results, incident, run)}/report.html"


def trace(results: str, incident: str, run: str) -> str:
    return f"{run_dir(results, incident, run)}/trace.perfetto.json"


def work(results: str, incident: str, run: str, block: str) -> str:
    return f"{run_dir(results, incident, run)}/work/{block}"


def run_log(results: str, incident: str, run: str, name: str) -> str:
    return f"{run_dir(results, incident, run)}/logs/{name}"


def run_key(candidate, design: dict, experiment: str | None, source_repo: str | None = None) -> str:
    """The run directory's name for a plan made from these inputs (see the module doc)."""
    cand = candidate
    if isinstance(candidate, dict) and candidate.get("patch"):
        p = Path(str(candidate["patch"]))
        # The patch's bytes, not only its name: an edited patch is another plan.
        cand = dict(candidate, patch_digest=hash_file(p) if p.is_file() else None)
    digest = records.digest_of({"candidate": cand, "design": design, "experiment": experiment,
                                "source_repo": source_repo})
    kind = "exp" if experiment else "aa" if candidate == "baseline" else "ab"
    return f"{kind}-{digest[:12]}"


def _link(path: Path, target: str) -> None:
    """Point the symlink `path` at `target` atomically (a temp link renamed over it)."""
    tmp = path.with_name(f".tmp-link-{os.getpid()}-{path.name}")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def point_latest(results: str, incident: str, run: str, plan_digest: str) -> list[str]:
    """Make results/<incident>/ show run `run`; write latest.json. Returns notes (one line each)
    about names that are not links (an older layout's files, left untouched)."""
    inc = Path(incident_dir(results, incident))
    latest = inc / LATEST
    if latest.exists() and not latest.is_symlink():
        raise StallcaseError(latest, "is not a link; move it away so it can point at the latest run")
    _link(latest, f"{RUNS}/{run}")
    notes = []
    for name in LATEST_NAMES:
        p = inc / name
        if p.is_symlink() or not os.path.lexists(p):
            if not (p.is_symlink() and os.readlink(p) == f"{LATEST}/{name}"):
                _link(p, f"{LATEST}/{name}")
        else:
            notes.append(f"{p}: not a link (an older results layout); the latest run's is {inc / LATEST / name}")
    latest = Latest(incident_id=incident, run=run, run_dir=f"{RUNS}/{run}", plan_digest=plan_digest)
    records.write_record(latest_record(results, incident), latest.to_json(), "latest")
    return notes
