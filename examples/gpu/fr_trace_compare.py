"""PyTorch's flight-recorder analyzer and stallcase on the same dumps: matches and mismatches side by side.

Run on a machine with torch (the dumps come from examples/gpu/two_rank_collectives.py):

    python3 examples/gpu/fr_trace_compare.py $OUT/h200x2_collectives --out $OUT/fr_trace_compare.json

Variants built from the recorded dumps (in a temp dir, named nccl_trace_rank_<r> as torch's
loader wants): as_recorded; missing_rank (rank 1's dump left out); size_mismatch (rank 1's
10th world all_reduce claims another size); wrapped (the oldest 20 / 25 entries of rank 0 /
rank 1 evicted, as a full ring buffer would). For each, torch's builder runs in-process
(`build_db`, as `fr_trace` does) and its CLI runs as a subprocess for its own text; stallcase
imports and analyses the same files. Prints both verdicts per (group, seq) and the differences.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from workflow_lib.collectives import analyze_collectives  # noqa: E402
from workflow_lib.importers.torch_fr import read_dump, rank_of  # noqa: E402
from workflow_lib.importers.torch_fr import import_torch_fr  # noqa: E402
from workflow_lib.core.incident import read_incident  # noqa: E402

PREFIX = "nccl_trace_rank_"


def variants(src: Path) -> dict[str, dict[int, dict]]:
    dumps = {rank_of(p, d): d for p, d in ((p, read_dump(p)) for p in sorted(src.glob(PREFIX + "*")))}
    out = {"as_recorded": dumps, "missing_rank": {0: dumps[0]}}
    bad = {r: {**d, "entries": [dict(e) for e in d["entries"]]} for r, d in dumps.items()}
    world = [e for e in bad[1]["entries"] if e["process_group"][0] == bad[1]["entries"][0]["process_group"][0]]
    target = world[min(9, len(world) - 1)]
    target["input_sizes"] = [[7]]
    target["output_sizes"] = [[7]]
    out["size_mismatch"] = bad
    out["wrapped"] = {0: {**dumps[0], "entries": dumps[0]["entries"][20:]}, 1: {**dumps[1], "entries": dumps[1]["entries"][25:]}}
    return out


def write(vdir: Path, dumps: dict[int, dict]) -> list[Path]:
    vdir.mkdir(parents=True)
    paths = []
    for r, d in dumps.items():
        p = vdir / f"{PREFIX}{r}"
        p.write_bytes(pickle.dumps(d, protocol=2))  # our own data, written for torch's loader
        paths.append(p)
    return paths


def torch_verdicts(vdir: Path, incomplete: bool) -> dict:
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    argv = [str(vdir), "--prefix", PREFIX] + (["--allow-incomplete-ranks"] if incomplete else [])
    try:
        args = JobConfig().parse_args(argv)
        details, version = read_dir(args)
        db = build_db(details, args, version)
    # torch's builder signals what it cannot analyse with assertions and lookups that fail;
    # the comparison records the error rather than stopping.
    except (AssertionError, KeyError, ValueError, IndexError, TypeError, AttributeError, NotImplementedError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "ops": {}}
    ops = {}
    for c in db.collectives:
        errors = {str(r): str(c2.type_of_mismatch) for r, c2 in (c.mismatch_collectives or {}).items()}
        verdict = "matched" if c.pass_check else ("missing_ranks" if c.missing_ranks else "mismatch")
        ops[f"{c.group_id}:{c.collective_seq_id}:{c.record_id}"] = {
            "group": c.group_id, "seq_id": c.collective_seq_id, "name": c.collective_name, "verdict": verdict,
            "missing_ranks": sorted(c.missing_ranks or []), "errors": errors}
    cli = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", *argv],
                         capture_output=True, text=True, timeout=300, check=False)
    tail = (cli.stdout + cli.stderr).splitlines()[-40:]
    return {"error": None, "ops": ops, "collectives": len(db.collectives), "cli_rc": cli.returncode, "cli_tail": tail}


def stallcase_verdicts(paths: list[Path], tmp: Path, name: str) -> dict:
    inc = read_incident(import_torch_fr(paths, incident_id=name, incidents_dir=tmp / "incidents"))
    rec = analyze_collectives([inc])
    ops = {f"{o['pg_id']}:{o['seq_id']}:{o['sub']}": {
        "group": o["pg_id"], "seq_id": o["seq_id"], "name": o["op_type"], "verdict": o["status"],
        "culprits": [m["culprit_ranks"] if m["decided"] else "cannot decide" for m in o["mismatches"]],
        "attribution": (o["attribution"] or {}).get("verdict")} for o in rec["ops"]}
    return {"summary": rec["summary"], "ops": ops}


def compare(t: dict, s: dict) -> dict:
    tv = {(o["group"], o["seq_id"]): o["verdict"] for o in t["ops"].values()}
    sv = {(o["group"], o["seq_id"]): o["verdict"] for o in s["ops"].values() if o["name"] != "coalesced"}
    keys = sorted(set(tv) | set(sv), key=lambda k: (str(k[0]), k[1]))
    rows = [{"group": k[0], "seq_id": k[1], "torch": tv.get(k), "stallcase": sv.get(k)} for k in keys]
    same = lambda r: (r["torch"] == "matched") == (r["stallcase"] == "matched") and r["torch"] is not None and r["stallcase"] is not None
    return {"agree": sum(map(same, rows)), "differ": [r for r in rows if not same(r)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", type=Path, help="directory with nccl_trace_rank_<r> pickles")
    ap.add_argument("--out", type=Path, default=None, help="write the comparison as JSON here")
    a = ap.parse_args(argv)
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, dumps in variants(a.dumps).items():
            paths = write(Path(tmp) / name, dumps)
            t = torch_verdicts(Path(tmp) / name, incomplete=name == "missing_rank")
            s = stallcase_verdicts(paths, Path(tmp), name)
            c = compare(t, s)
            result[name] = {"torch": t, "stallcase": s, "comparison": c}
            print(f"== {name}: torch {'error ' + t['error'] if t['error'] else str(len(t['ops'])) + ' collectives'}; "
                  f"stallcase {s['summary']}")
            print(f"   agree on matched/not matched for {c['agree']} ops; differ on {len(c['differ'])}")
            for r in c["differ"][:15]:
                print(f"   {r['group']} seq {r['seq_id']}: torch={r['torch']} stallcase={r['stallcase']}")
    if a.out:
        a.out.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
